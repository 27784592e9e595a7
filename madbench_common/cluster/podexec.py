"""Start one pod's container: join its network namespace and memory cgroup, run, report.

``python -m madbench_common.cluster.podexec`` reads one JSON request on stdin and runs the
container under the pod policy (uid 10001, read-only root, ``/tmp`` a tmpfs, capabilities
dropped, no-new-privileges, the runtime-default seccomp profile, ``runAsNonRoot``
enforced) inside the pod's network namespace and memory cgroup (:func:`main`).
"""

from __future__ import annotations

import ctypes
import json
import os
import resource
import signal
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

__all__ = ["descendants", "enter_netns", "kill_tree", "main"]

_CLONE_NEWNET = 0x40000000


def enter_netns(path: str) -> None:
    """Move the calling thread into the network namespace at ``path`` (setns(2))."""
    libc = ctypes.CDLL(None, use_errno=True)
    fd = os.open(path, os.O_RDONLY)
    try:
        if libc.setns(fd, _CLONE_NEWNET) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"setns({path}): {os.strerror(err)}")
    finally:
        os.close(fd)


def _parents() -> dict[int, int]:
    out = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # the command may contain spaces and parentheses: the ppid follows the last ')'
        out[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
    return out


def descendants(pid: int) -> Iterator[int]:
    """Every process below ``pid`` (children first-found order)."""
    parents = _parents()
    todo, seen = [pid], set()
    while todo:
        cur = todo.pop()
        for child, parent in parents.items():
            if parent == cur and child not in seen:
                seen.add(child)
                todo.append(child)
                yield child


def kill_tree(pid: int, sig: int = signal.SIGKILL, include_self: bool = False) -> int:
    """Send ``sig`` to every process below ``pid`` (and ``pid`` itself if asked)."""
    count = 0
    for child in [*descendants(pid), *([pid] if include_self else [])]:
        try:
            os.kill(child, sig)
            count += 1
        except ProcessLookupError:
            pass
    return count


_terminated = False


def _on_term(signum: int, frame: Any) -> None:
    global _terminated
    _terminated = True
    kill_tree(os.getpid())


def main() -> int:
    """Read one JSON request on stdin (so the pod's secret environment never appears in an
    argument list or a file)::

        {"image": <local image id or ref>, "argv": [...], "env": {...},
         "mounts": [[host, target, read_only], ...], "engine": "buildah",
         "netns": "/proc/<pid>/ns/net" | null, "cgroup": "<cgroup dir>" | null,
         "result": "<path of the result JSON>", "name": "<working container name>" | null}

    Move into ``cgroup`` (whose memory limit the caller set; every process of the pod
    inherits it), enter ``netns`` (a private namespace with only loopback: the pod reaches
    what runs there and nothing else), and run the container through
    :func:`madbench_common.imagefactory.containers.run_in_image` under the pod policy, sharing that
    namespace. The container's output goes to this process's stdout and stderr. The result
    file gets the exit code and the peak RSS of the largest process of the pod
    (``RUSAGE_CHILDREN``). SIGTERM (a deadline, or the rehearsal stopping) kills every
    process under this one; the engine then removes its working container and the result
    says ``terminated``.
    """
    request = json.loads(sys.stdin.read())
    result_path = Path(request["result"])
    signal.signal(signal.SIGTERM, _on_term)
    out: dict[str, Any] = {"exit_code": None, "error": "", "terminated": False}
    start = time.monotonic()
    try:
        if request.get("cgroup"):
            Path(request["cgroup"], "cgroup.procs").write_text(str(os.getpid()))
        if request.get("netns"):
            enter_netns(request["netns"])
        from madbench_common.core.errors import MadbenchError
        from madbench_common.imagefactory.containers import ContainerFailed, Mount, run_in_image

        mounts = [Mount(Path(h), t, bool(ro)) for h, t, ro in request.get("mounts", [])]
        try:
            run_in_image(request["image"], request["argv"], mounts=mounts,
                         env=request.get("env", {}), engine=request.get("engine"),
                         network=bool(request.get("netns")), name=request.get("name"))
            out["exit_code"] = 0
        except ContainerFailed as exc:
            out["exit_code"] = exc.code
        except MadbenchError as exc:
            out["error"] = str(exc)
    except OSError as exc:
        out["error"] = f"could not start the pod: {exc}"
    out["terminated"] = _terminated
    out["seconds"] = time.monotonic() - start
    out["peak_rss_bytes"] = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
    tmp = result_path.with_suffix(".tmp")
    tmp.write_text(json.dumps(out))
    tmp.replace(result_path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
