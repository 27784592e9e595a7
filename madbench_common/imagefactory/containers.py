"""Run a command inside a built image with the pod policy: uid 10001, read-only root, no network.

The same policy as the Argo pods: the image's root file system is read-only, ``/tmp`` is
a fresh tmpfs (``HOME=/tmp``), there is no network, all capabilities are dropped, and only
the given host folders are mounted (read-only unless asked). Engines: ``podman`` /
``docker`` (``run --rm --read-only --tmpfs /tmp --network none --user 10001:10001
--cap-drop ALL``; a GPU by CDI or ``--gpus all``) and ``buildah`` where no OCI runtime
starts (:func:`_buildah_run`). Every engine reads the same back inside the container
(``/proc/self/status``: ``Uid`` not 0, ``NoNewPrivs: 1``, ``Seccomp: 2``); a test does.
``$MADBENCH_RUN_ENGINE`` picks the engine; by default the first that can start one here.
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from madbench_common.core.errors import ConfigError, MadbenchError

__all__ = ["ContainerFailed", "Mount", "container_name", "remove_containers", "run_engine",
           "run_in_image"]

USER = "10001:10001"
_RUN_ENGINES = ("podman", "docker", "buildah")


class ContainerFailed(MadbenchError):
    """A command inside an image exited non-zero."""

    def __init__(self, image: str, argv: Sequence[str], code: int, output: str) -> None:
        self.code, self.output = code, output
        super().__init__(f"{image}: {' '.join(argv)} exited {code}\n{output[-4000:]}")


@dataclass(frozen=True)
class Mount:
    """A host folder mounted into the container."""

    host: Path
    target: str
    read_only: bool = True


@functools.cache
def _can_run(eng: str) -> bool:
    """Whether ``eng`` can start a container on this machine."""
    if not shutil.which(eng):
        return False
    if eng == "buildah":
        return shutil.which("unshare") is not None and os.geteuid() == 0
    if eng == "docker":
        return subprocess.run(["docker", "info"], capture_output=True).returncode == 0
    probe = subprocess.run(["podman", "run", "--rm", "--network", "none", "--pull", "never",
                            "--rootfs", "/", "true"], capture_output=True, text=True)
    return probe.returncode == 0


def run_engine(wanted: str | None = None) -> str:
    """The engine that runs containers: ``wanted`` (or ``$MADBENCH_RUN_ENGINE``) if it can,
    else the first of podman, docker, buildah that can start a container here."""
    wanted = wanted or os.environ.get("MADBENCH_RUN_ENGINE") or None
    for eng in ([wanted] if wanted else _RUN_ENGINES):
        if eng not in _RUN_ENGINES:
            raise ConfigError(f"unknown container engine {eng!r}; use one of {_RUN_ENGINES}")
        if _can_run(eng):
            return eng
    raise ConfigError(f"no container engine can start containers here (tried "
                      f"{wanted or ', '.join(_RUN_ENGINES)}); install podman or docker, or "
                      f"buildah (as root)")


SECCOMP_PROFILE = Path("/usr/share/containers/seccomp.json")
"""The runtime-default seccomp profile of the containers tools (Debian's
``golang-github-containers-common``); podman and CRI-O's ``RuntimeDefault`` is this file."""
_NO_NEW_PRIVS = ("import ctypes, os, sys; "
                 "assert ctypes.CDLL(None, use_errno=True).prctl(38, 1, 0, 0, 0) == 0; "
                 "os.execvp(sys.argv[1], sys.argv[1:])")
"""prctl(PR_SET_NO_NEW_PRIVS, 1) and exec the rest of argv (inherited by every child)."""


@dataclass(frozen=True)
class _Policy:
    gpu: bool = False
    network: bool = False
    user: str = USER
    non_root: bool = True


def check_non_root(user: str, image: str) -> None:
    """``runAsNonRoot``, enforced as the kubelet does before a container starts: the
    user must be a numeric uid other than 0 (a name cannot be verified)."""
    uid = user.split(":", 1)[0]
    if not uid.isdigit():
        raise ConfigError(f"image {image}: runAsNonRoot and a non-numeric user {uid!r}: "
                          "cannot verify that it is not root")
    if int(uid) == 0:
        raise ConfigError(f"image {image}: runAsNonRoot, but the container would run as "
                          f"root ({user})")


def _oci_cmd(eng: str, image: str, argv: Sequence[str], mounts: Sequence[Mount],
             env: Mapping[str, str], policy: _Policy) -> list[str]:
    cmd = [eng, "run", "--rm", "--read-only", "--tmpfs", "/tmp:rw,exec,mode=1777",
           "--network", "host" if policy.network else "none", "--user", policy.user,
           "--cap-drop", "ALL", "--security-opt", "no-new-privileges", "--entrypoint", argv[0]]
    if eng == "podman":
        cmd += ["--pull", "never"]
    if policy.gpu:
        cmd += ["--device", "nvidia.com/gpu=all"] if eng == "podman" else ["--gpus", "all"]
    for m in mounts:
        cmd += ["-v", f"{m.host}:{m.target}:{'ro' if m.read_only else 'rw'}"]
    for key, value in env.items():
        cmd += ["-e", f"{key}={value}"]
    return [*cmd, image, *argv[1:]]


def _buildah_script(ctr: str, argv: Sequence[str], mounts: Sequence[Mount],
                    env: Mapping[str, str], user: str) -> str:
    """Shell run under ``unshare --mount``: read-only root, then ``buildah run``.

    ``/tmp`` and ``/run`` are fresh tmpfs mounts (buildah writes ``/run/.containerenv``
    and removes it afterwards); the container root is bind-remounted read-only on top.
    """
    # never empty: ``mkdir -p`` without operands fails (a run without mounts)
    points = " ".join(f'"$mnt"{shlex.quote(m.target)}' for m in mounts) or '"$mnt/tmp"'
    run = ["buildah", "run", "--isolation", "chroot", "--user", user, "--cap-drop", "all",
           "--no-hosts"]
    for m in mounts:
        run += ["-v", f"{m.host}:{m.target}:{'ro' if m.read_only else 'rw'}"]
    for key, value in env.items():
        run += ["-e", f"{key}={value}"]
    run = [sys.executable, "-c", _NO_NEW_PRIVS, *run]  # allowPrivilegeEscalation: false
    return (f"set -e; mnt=$(buildah mount {ctr}); mkdir -p \"$mnt/tmp\" \"$mnt/run\"; "
            "touch \"$mnt/etc/resolv.conf\" \"$mnt/etc/hostname\"; "
            "mount -t tmpfs -o mode=1777 tmpfs \"$mnt/tmp\"; "
            "mount -t tmpfs -o mode=755 tmpfs \"$mnt/run\"; "
            f"mkdir -p {points}; "
            "mount --rbind \"$mnt\" \"$mnt\"; mount -o remount,bind,ro \"$mnt\"; "
            f"exec {shlex.join([*run, ctr, '--', *argv])}")


def container_name(*parts: str) -> str:
    """A working-container name from ``parts``: characters buildah and podman accept
    (``[a-zA-Z0-9][a-zA-Z0-9_.-]*``), long parts shortened with a digest of the whole."""
    raw = "-".join(parts)
    name = re.sub(r"[^a-zA-Z0-9_.-]+", "_", raw).strip("_.-") or "ctr"
    if len(name) > 120:
        name = f"{name[:100]}-{hashlib.sha256(raw.encode()).hexdigest()[:12]}"
    return name


def remove_containers(prefix: str, engine: str | None = None) -> list[str]:
    """Remove the containers whose name starts with ``prefix`` (a killed run's leftovers);
    returns their names. Only buildah leaves any: the OCI engines run ``--rm``."""
    if not prefix or (engine or "buildah") != "buildah" or not shutil.which("buildah"):
        return []
    out = subprocess.run(["buildah", "containers", "--format", "{{.ContainerName}}"],
                         capture_output=True, text=True)
    gone = []
    for name in out.stdout.split():
        if name.startswith(prefix) and subprocess.run(
                ["buildah", "rm", name], capture_output=True).returncode == 0:
            gone.append(name)
    return gone


def _buildah_run(image: str, argv: Sequence[str], mounts: Sequence[Mount],
                 env: Mapping[str, str], policy: _Policy,
                 capture: bool, name: str | None = None) -> subprocess.CompletedProcess[str]:
    """The pod policy without an OCI runtime (where crun fails with ``setrlimit
    RLIMIT_NOFILE: Operation not permitted``). A working container is made from the image
    and its root mounted, bind-remounted read-only inside a private mount namespace, and
    the command runs there with ``buildah run --isolation chroot`` under ``unshare --net``
    (no network); ``buildah rm`` removes it afterwards. It needs root and cannot pass GPUs
    through. The rest of the pods' ``securityContext`` holds too: ``no-new-privileges``
    (``allowPrivilegeEscalation: false``) is set with ``prctl(PR_SET_NO_NEW_PRIVS)`` on the
    ``buildah run`` process, which the container inherits (buildah 1.28 refuses
    ``--security-opt no-new-privileges`` with chroot isolation); the seccomp profile is
    the runtime default (``seccompProfile: RuntimeDefault``): containers-common's
    ``seccomp.json``, named explicitly on ``buildah from`` where it is installed, else
    buildah's built-in copy of it; ``runAsNonRoot`` is enforced before the start
    (:func:`check_non_root`)."""
    named: list[str] = []
    if name:  # a leftover of this name is the caller's own (a killed attempt)
        subprocess.run(["buildah", "rm", name], capture_output=True)
        named = ["--name", name]
    # the runtime-default seccomp profile, by name where containers-common installed it
    seccomp = (["--security-opt", f"seccomp={SECCOMP_PROFILE}"] if SECCOMP_PROFILE.is_file()
               else [])
    made = subprocess.run(["buildah", "from", "--pull=never", "--quiet", *seccomp, *named,
                           image], capture_output=True, text=True)
    if made.returncode != 0:
        raise ConfigError(f"image {image} is not here ({made.stderr.strip()}); "
                          f"build it with make image")
    ctr = made.stdout.strip()
    try:
        script = _buildah_script(ctr, argv, mounts, env, policy.user)
        unshare = ["unshare", "--mount", "--propagation", "private",
                   *([] if policy.network else ["--net"])]
        return subprocess.run([*unshare, "sh", "-c", script], text=True, capture_output=capture)
    finally:
        subprocess.run(["buildah", "rm", ctr], capture_output=True)


def run_in_image(image: str, argv: Sequence[str], *, mounts: Sequence[Mount] = (),
                 env: Mapping[str, str] | None = None, gpu: bool = False,
                 engine: str | None = None, capture: bool = False, network: bool = False,
                 user: str = USER, name: str | None = None, non_root: bool = True) -> str:
    """Run ``argv`` in ``image`` under the pod policy; return stdout when ``capture``.

    ``network`` and ``user`` relax the policy for tooling (the Python 3.9 adapter tests
    install their venv inside the base image, as root: ``non_root=False``); stages never
    use them. ``non_root``: refuse a user that is root (``runAsNonRoot``). ``name`` names the
    working container (see :func:`remove_containers`; the OCI engines' ``--name``).
    Raises :class:`ContainerFailed` on a non-zero exit (its output attached when captured).
    """
    eng = run_engine(engine)
    env = dict(env or {})
    policy = _Policy(gpu=gpu, network=network, user=user, non_root=non_root)
    if non_root:
        check_non_root(user, image)
    # Parents before children: a folder mounted inside another mount must come after it.
    mounts = sorted(mounts, key=lambda m: len(Path(m.target).parts))
    if eng == "buildah":
        if gpu:
            raise ConfigError("the buildah engine cannot pass GPUs through; use podman or "
                              "docker with the NVIDIA container toolkit")
        out = _buildah_run(image, argv, mounts, env, policy, capture, name)
    else:
        cmd = _oci_cmd(eng, image, argv, mounts, env, policy)
        if name:
            cmd[2:2] = ["--name", name]
        out = subprocess.run(cmd, text=True, capture_output=capture)
    if out.returncode != 0:
        raise ContainerFailed(image, argv, out.returncode,
                              (out.stdout or "") + (out.stderr or ""))
    return out.stdout or ""
