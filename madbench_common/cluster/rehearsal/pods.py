"""Running one pod (:class:`PodRunner`, what the executor calls): in its image inside the
sandbox's network namespace, in a memory cgroup that enforces ``limits.memory`` (cgroup v1
or v2), within its deadline, with secrets from the local set and its log redacted; and the
memo (:class:`StateMemo`) by which a resumed pass skips the pods it ran before."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from madbench_common.cluster.argo_local import Pod, PodResult, SecretRef
from madbench_common.cluster.lint import image_slug
from madbench_common.cluster.rehearsal.images import ImageProvider
from madbench_common.cluster.rehearsal.profile import ROOT
from madbench_common.cluster.rehearsal.state import State
from madbench_common.core.errors import ConfigError

_WEIGHTS_CLAIM = "madbench-weights"
_DATA_CLAIM = "madbench-data"
"""deaf.yaml's data sets (DEMAND, EMIS): an empty folder here; the rehearsal profile runs
the data stages on their stand-ins (``<stage>_stand_ins=allow``)."""
_KILL_GRACE = 30.0


class StateMemo:
    """Pods done before: key (spec, upstream results, image recipe, weights) → outcome."""

    def __init__(self, state: State, workflow: str, provider: ImageProvider,
                 done_stages: Callable[[], set[str]]) -> None:
        self.state, self.workflow, self.provider = state, workflow, provider
        self._done_stages = done_stages

    def _key(self, key: str, pod: Pod) -> str:
        return hashlib.sha256((key + self.provider.identity(pod.image)).encode()).hexdigest()

    def done(self, key: str, pod: Pod) -> bool:
        with self.state.lock:
            entry = self.state.data["memo"].get(self.workflow, {}).get(self._key(key, pod))
        stage = _stage_of(pod)
        return entry is not None and (stage is None or stage in self._done_stages())

    def record(self, key: str, pod: Pod, result: PodResult) -> None:
        """Keep the pod's outcome. A pod that ran before under the same key (its stage had
        not finished, so the memo did not skip it) found its shard's output and ended in
        seconds: the entry keeps the larger of each measure, the run that did the work
        (a resumed pass had recorded Baichuan's 238 MiB re-run over its 3,074 MiB run)."""
        with self.state.lock:
            memo = self.state.data["memo"].setdefault(self.workflow, {})
            mkey = self._key(key, pod)
            entry = {"node": pod.node, "image": pod.image,
                     "seconds": round(result.seconds, 3),
                     "gpu_requested": bool(result.info.get("gpu_requested", pod.gpu)),
                     **{k: result.info.get(k) for k in ("peak_rss_bytes", "cgroup_peak_bytes")}}
            earlier = memo.get(mkey) or {}
            for k in ("seconds", "peak_rss_bytes", "cgroup_peak_bytes"):
                before = earlier.get(k)
                if before is not None and (entry[k] is None or before > entry[k]):
                    entry[k] = before
            memo[mkey] = entry
            self.state.save()

    def entry(self, key: str, pod: Pod) -> dict[str, Any]:
        with self.state.lock:
            return dict(self.state.data["memo"].get(self.workflow, {}).get(
                self._key(key, pod), {}))


def _stage_of(pod: Pod) -> str | None:
    argv = list(pod.argv)
    if "--stage" in argv and ("run" in argv or "merge" in argv):
        return argv[argv.index("--stage") + 1]
    return None


class _Cgroup:
    """A memory cgroup for one pod, below this process's own (v1 or v2)."""

    def __init__(self, limit: int | None) -> None:
        self.path: Path | None = None
        self.version = 0
        self.why = ""
        base = _memory_cgroup()
        if base is None:
            self.why = "no writable memory cgroup here"
            return
        path, version = base
        try:
            child = path / f"madbench-pod-{uuid.uuid4().hex[:12]}"
            child.mkdir()
            if limit:
                if version == 1:
                    (child / "memory.limit_in_bytes").write_text(str(limit))
                else:
                    (child / "memory.max").write_text(str(limit))
                    if (child / "memory.swap.max").exists():
                        (child / "memory.swap.max").write_text("0")
            self.path, self.version = child, version
        except OSError as exc:
            self.why = f"cannot make a memory cgroup under {path}: {exc}"

    def stats(self) -> dict[str, Any]:
        if self.path is None:
            return {"memory_limit_enforced": False, "memory_note": self.why}
        p = self.path
        peak: int | None
        try:
            if self.version == 1:
                peak = int((p / "memory.max_usage_in_bytes").read_text())
                oom = _kv(p / "memory.oom_control").get("oom_kill", 0)
            else:
                peak_file = p / "memory.peak"
                peak = int(peak_file.read_text()) if peak_file.exists() else None
                oom = _kv(p / "memory.events").get("oom_kill", 0)
        except (OSError, ValueError):
            return {"memory_limit_enforced": True}
        return {"memory_limit_enforced": True, "cgroup_peak_bytes": peak,
                "oom_killed": bool(oom)}

    def kill_all(self) -> None:
        if self.path is None:
            return
        for line in (self.path / "cgroup.procs").read_text().split():
            with contextlib.suppress(ProcessLookupError, ValueError):
                os.kill(int(line), signal.SIGKILL)

    def remove(self) -> None:
        if self.path is None:
            return
        for _ in range(50):
            try:
                self.path.rmdir()
                return
            except OSError:
                self.kill_all()
                time.sleep(0.2)


def _kv(path: Path) -> dict[str, int]:
    out = {}
    for line in path.read_text().splitlines():
        k, _, v = line.partition(" ")
        if v.strip().isdigit():
            out[k] = int(v)
    return out


def _memory_cgroup() -> tuple[Path, int] | None:
    """This process's memory cgroup directory and its version, if we may write there."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    mounts = Path("/proc/self/mountinfo").read_text().splitlines()

    def under(fields: list[str], rel: str) -> Path:
        """The cgroup ``rel`` below the mount (whose own root is ``fields[3]``)."""
        root = fields[3].rstrip("/")
        rel = rel[len(root):] if root and rel.startswith(root) else rel
        return Path(fields[4]) / rel.lstrip("/")

    for line in lines:
        _, controllers, rel = line.split(":", 2)
        if "memory" in controllers.split(","):
            for m in mounts:
                fields = m.split()
                sep = fields.index("-")
                if fields[sep + 1] == "cgroup" and "memory" in fields[-1].split(","):
                    path = under(fields, rel)
                    return (path, 1) if os.access(path, os.W_OK) else None
    for line in lines:
        if line.startswith("0::"):
            for m in mounts:
                fields = m.split()
                sep = fields.index("-")
                if fields[sep + 1] == "cgroup2":
                    path = under(fields, line[3:])
                    ctl = path / "cgroup.controllers"
                    if ctl.exists() and "memory" in ctl.read_text().split() and \
                            os.access(path, os.W_OK):
                        return path, 2
    return None


class PodRunner:
    """Runs pods in their images inside the sandbox; what :class:`Executor` calls."""

    def __init__(self, provider: ImageProvider, secrets: Mapping[str, Mapping[str, str]],
                 work: Path, netns: str | None, engine: str = "buildah",
                 python: str = sys.executable, cpu_deadline_scale: float = 1.0) -> None:
        self.cpu_deadline_scale = cpu_deadline_scale
        self.provider, self.secrets, self.work = provider, secrets, work
        self.netns, self.engine, self.python = netns, engine, python
        self.logs = work / "logs"
        self.logs.mkdir(parents=True, exist_ok=True)
        self._redact = sorted({v for s in secrets.values() for v in s.values()
                               if len(v) >= 4}, key=len, reverse=True)

    def redact(self, text: str) -> str:
        for value in self._redact:
            text = text.replace(value, "***")
        return text

    def prepare(self, pod: Pod) -> None:
        self.provider.ensure(pod.image)

    def _env(self, pod: Pod) -> dict[str, str]:
        env = {}
        for name, value in pod.env:
            if isinstance(value, SecretRef):
                found = self.secrets.get(value.secret, {}).get(value.key)
                if found is None:
                    if value.optional:
                        continue
                    raise ConfigError(f"secret {value.secret!r} has no key {value.key!r} (the "
                                      "pod could not start: CreateContainerConfigError)")
                env[name] = found
            else:
                env[name] = value
        return env

    def _mounts(self, pod: Pod) -> list[list[Any]]:
        out = []
        slug, _ = image_slug(pod.image.split("@", 1)[0])
        for m in pod.mounts:
            if m.kind == "emptyDir":
                if m.path != "/tmp":
                    raise ConfigError(f"emptyDir at {m.path}: only /tmp (the engine's tmpfs) "
                                      "is supported")
                continue
            if m.claim == _DATA_CLAIM and m.read_only:
                (self.work / "data").mkdir(parents=True, exist_ok=True)
                out.append([str(self.work / "data"), m.path, True])
                continue
            if m.claim != _WEIGHTS_CLAIM:
                raise ConfigError(f"no local volume for the claim {m.claim!r}")
            if not m.read_only:
                raise ConfigError(f"the weights claim is mounted writable at {m.path}")
            folder = self.provider.weights_dir(slug)
            folder.mkdir(parents=True, exist_ok=True)
            out.append([str(folder), m.path, True])
        return out

    def deadline(self, pod: Pod) -> float | None:
        """The pod's ``activeDeadlineSeconds``; a GPU pod's times ``cpu_deadline_scale``,
        since it runs on the CPU here (AV Anomaly's full-size backbone took more than the
        template's hour for one shard of 120 samples on 2 cores)."""
        if not pod.deadline:
            return None
        return float(pod.deadline) * (self.cpu_deadline_scale if pod.gpu else 1.0)

    def run(self, pod: Pod, attempt: int, cancel: threading.Event) -> PodResult:
        start = time.monotonic()
        info: dict[str, Any] = {"memory_limit": pod.memory_limit, "gpu_requested": pod.gpu}
        deadline = self.deadline(pod)
        if deadline:
            info["deadline_s"] = deadline
        try:
            env = self._env(pod)
            mounts = self._mounts(pod)
            image_id = self.provider.ensure(pod.image)
        except ConfigError as exc:
            return PodResult("Error", None, str(exc), 0.0, {**info, "no_retry": True})
        safe = re.sub(r"[^A-Za-z0-9_.()-]", "_", pod.node)
        log = self.logs / pod.node.split(".", 1)[0] / f"{safe}.{attempt}.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        result_file = log.with_suffix(".result.json")
        result_file.unlink(missing_ok=True)
        cgroup = _Cgroup(pod.memory_limit)
        request = {"image": image_id, "argv": list(pod.argv), "env": env, "mounts": mounts,
                   "engine": self.engine, "netns": self.netns,
                   "cgroup": str(cgroup.path) if cgroup.path else None,
                   "result": str(result_file),
                   "name": self.provider.container(safe, str(attempt))}
        tail: list[str] = []
        reason = ""
        from madbench_common.cluster.sandbox import pdeathsig

        try:
            proc = subprocess.Popen([self.python, "-m", "madbench_common.cluster.podexec"],
                                    stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                    stderr=subprocess.STDOUT, text=True, cwd=ROOT,
                                    env={**os.environ, "PYTHONPATH": str(ROOT)},
                                    start_new_session=True, preexec_fn=pdeathsig())
            assert proc.stdin is not None and proc.stdout is not None
            proc.stdin.write(json.dumps(request))
            proc.stdin.close()
            reader = threading.Thread(target=self._pump, args=(proc.stdout, log, tail),
                                      daemon=True)
            reader.start()
            while proc.poll() is None:
                if cancel.wait(1.0) and not reason:
                    reason = "cancelled"
                elif deadline and time.monotonic() - start > deadline and not reason:
                    reason = (f"deadline exceeded (activeDeadlineSeconds {pod.deadline:.0f}"
                              + (f" × {self.cpu_deadline_scale:g}, a GPU pod on the CPU)"
                                 if deadline != pod.deadline else ")"))
                if reason:
                    self._stop(proc, cgroup)
                    break
            proc.wait()
            reader.join(timeout=10)
        finally:
            info.update(cgroup.stats())
            cgroup.remove()
        seconds = time.monotonic() - start
        result = json.loads(result_file.read_text()) if result_file.exists() else {}
        info.update({"peak_rss_bytes": result.get("peak_rss_bytes"), "log": str(log)})
        message = self.redact("".join(tail))[-3000:]
        code = result.get("exit_code")
        if reason:
            return PodResult("Failed", code if code not in (None, 0) else 143,
                             f"{reason}\n{message}", seconds, info)
        if result.get("error"):
            return PodResult("Error", None, self.redact(result["error"]), seconds,
                             {**info, "no_retry": True})
        if code == 0:
            return PodResult("Succeeded", 0, message[-500:], seconds, info)
        if info.get("oom_killed"):
            message = f"OOMKilled (limits.memory {pod.memory_limit} bytes)\n{message}"
        return PodResult("Failed", code, message, seconds, info)

    def _pump(self, stream: Any, log: Path, tail: list[str]) -> None:
        with open(log, "w") as fh:
            for line in stream:
                line = self.redact(line)
                fh.write(line)
                tail.append(line)
                if len(tail) > 200:
                    del tail[:100]

    def _stop(self, proc: subprocess.Popen[str], cgroup: _Cgroup) -> None:
        from madbench_common.cluster.podexec import kill_tree

        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=_KILL_GRACE)
        except subprocess.TimeoutExpired:
            kill_tree(proc.pid, include_self=True)
            cgroup.kill_all()
