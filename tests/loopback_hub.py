"""A loopback Hugging Face hub for tests: the few HTTP endpoints ``huggingface_hub`` calls.

``HF_ENDPOINT=http://127.0.0.1:<port>`` points ``HfApi.repo_info`` / ``model_info``,
``list_repo_tree``, ``hf_hub_download`` and ``snapshot_download`` at it. It serves
model repositories held in memory, each a list of commits (every commit a full file
tree) and branch refs:

- ``GET /api/models/<repo>/revision/<rev>``: repo info (``sha``, ``siblings``; LFS
  metadata with ``?blobs=true``);
- ``GET /api/models/<repo>/tree/<rev>[/<path>]``: the tree listing (``recursive``);
- ``HEAD``/``GET /<repo>/resolve/<rev>/<path>``: a file, with the ``X-Repo-Commit``,
  ``ETag`` (git blob sha1), ``X-Linked-Etag`` and ``X-Linked-Size`` (LFS: the sha256)
  headers the client reads.

Files whose name ends in ``.bin``, ``.safetensors``, ``.pt`` or ``.pth`` are LFS files, as on
the hub. :meth:`LoopbackHub.commit` pushes a commit to a branch (a file that changes
upstream); :meth:`LoopbackHub.tamper` makes the server send other bytes for a file of an
existing commit while its metadata stays (a hub or mirror that serves the wrong file).
It binds a free port on 127.0.0.1 and counts requests per (method, kind, revision).
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import parse_qs, unquote, urlparse

from madbench_common.testing import LoopbackServer

__all__ = ["LoopbackHub", "loopback_hub"]

_LFS = (".bin", ".safetensors", ".pt", ".pth")


def _blob_sha1(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


@dataclass
class _Repo:
    commits: dict[str, dict[str, bytes]] = field(default_factory=dict)
    refs: dict[str, str] = field(default_factory=dict)
    served: dict[tuple[str, str], bytes] = field(default_factory=dict)
    """(commit, path) → bytes sent instead of the committed ones (:meth:`LoopbackHub.tamper`)."""


class LoopbackHub(LoopbackServer):
    """An in-memory hub on a free loopback port (use :func:`loopback_hub`)."""

    def __init__(self) -> None:
        self.repos: dict[str, _Repo] = {}
        self.requests: Counter[tuple[str, str, str]] = Counter()
        hub = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                hub._handle(self, body=True)

            def do_HEAD(self) -> None:
                hub._handle(self, body=False)

            def log_message(self, format: str, *args: Any) -> None:  # quiet
                pass

        super().__init__(Handler)

    # ------------------------------------------------------------ repository content

    def commit(self, repo: str, files: dict[str, bytes], branch: str = "main") -> str:
        """Push ``files`` (merged over the branch head's tree) as a new commit; its sha."""
        r = self.repos.setdefault(repo, _Repo())
        parent = r.refs.get(branch, "")
        tree = {**(r.commits[parent] if parent else {}), **files}
        listing = json.dumps([parent, sorted((p, hashlib.sha256(d).hexdigest())
                                             for p, d in tree.items())]).encode()
        sha = hashlib.sha1(listing).hexdigest()
        r.commits[sha] = tree
        r.refs[branch] = sha
        return sha

    def tamper(self, repo: str, commit: str, path: str, data: bytes) -> None:
        """Serve ``data`` for ``path`` at ``commit`` from now on; the metadata stays."""
        self.repos[repo].served[(commit, path)] = data

    def file(self, repo: str, rev: str, path: str) -> bytes:
        r = self.repos[repo]
        return r.commits[r.refs.get(rev, rev)][path]

    # ------------------------------------------------------------ HTTP

    def _split(self, parts: list[str], marker: str) -> tuple[str, str, str] | None:
        """``<repo>/<marker>/<rev>/<rest>`` → (repo, rev, rest) for a known repo."""
        for i in range(1, min(3, len(parts)) + 1):
            repo = "/".join(parts[:i])
            if repo in self.repos and len(parts) > i + 1 and parts[i] == marker:
                return repo, unquote(parts[i + 1]), "/".join(parts[i + 2:])
        return None

    def _resolve(self, repo: str, rev: str) -> str | None:
        r = self.repos[repo]
        sha = r.refs.get(rev, rev)
        return sha if sha in r.commits else None

    def _handle(self, req: BaseHTTPRequestHandler, body: bool) -> None:
        url = urlparse(req.path)
        parts = [unquote(p) for p in url.path.strip("/").split("/")]
        query = parse_qs(url.query)
        if parts[:2] == ["api", "models"]:
            found = self._split(parts[2:], "revision") or self._split(parts[2:], "tree")
            kind = "tree" if self._split(parts[2:], "tree") else "info"
        else:
            found, kind = self._split(parts, "resolve"), "file"
        if found is None:
            return self._send(req, 404, b'{"error": "Repository not found"}', body,
                              {"X-Error-Code": "RepoNotFound"})
        repo, rev, rest = found
        self.requests[(req.command, kind, rev)] += 1
        sha = self._resolve(repo, rev)
        if sha is None:
            return self._send(req, 404, b'{"error": "Invalid rev id"}', body,
                              {"X-Error-Code": "RevisionNotFound"})
        if kind == "info":
            return self._json(req, self._info(repo, sha, "blobs" in query), body)
        if kind == "tree":
            return self._json(req, self._tree(repo, sha, rest), body)
        return self._file(req, repo, sha, rest, body)

    def _entry(self, path: str, data: bytes) -> dict[str, Any]:
        entry: dict[str, Any] = {"type": "file", "oid": _blob_sha1(data), "size": len(data),
                                 "path": path}
        if path.endswith(_LFS):
            entry["lfs"] = {"oid": hashlib.sha256(data).hexdigest(), "size": len(data),
                            "pointerSize": 134}
        return entry

    def _info(self, repo: str, sha: str, blobs: bool) -> dict[str, Any]:
        siblings = []
        for path, data in sorted(self.repos[repo].commits[sha].items()):
            sib: dict[str, Any] = {"rfilename": path}
            if blobs:
                e = self._entry(path, data)
                sib.update(size=e["size"], blobId=e["oid"])
                if "lfs" in e:
                    sib["lfs"] = {"sha256": e["lfs"]["oid"], "size": e["size"],
                                  "pointerSize": 134}
            siblings.append(sib)
        return {"_id": sha[:24], "id": repo, "modelId": repo, "sha": sha, "private": False,
                "disabled": False, "gated": False, "downloads": 0, "likes": 0, "tags": [],
                "lastModified": "2026-01-01T00:00:00.000Z", "siblings": siblings}

    def _tree(self, repo: str, sha: str, under: str) -> list[dict[str, Any]]:
        files = self.repos[repo].commits[sha]
        prefix = f"{under}/" if under else ""
        out, dirs = [], set()
        for path, data in sorted(files.items()):
            if not path.startswith(prefix):
                continue
            parts = path.split("/")
            dirs.update("/".join(parts[:i]) for i in range(1, len(parts)))
            out.append(self._entry(path, data))
        out += [{"type": "directory", "oid": "0" * 40, "size": 0, "path": d}
                for d in sorted(dirs) if d.startswith(prefix)]
        return out

    def _file(self, req: BaseHTTPRequestHandler, repo: str, sha: str, path: str,
              body: bool) -> None:
        r = self.repos[repo]
        if path not in r.commits[sha]:
            return self._send(req, 404, b'{"error": "Entry not found"}', body,
                              {"X-Error-Code": "EntryNotFound", "X-Repo-Commit": sha})
        meta = self._entry(path, r.commits[sha][path])
        data = r.served.get((sha, path), r.commits[sha][path])
        headers = {"X-Repo-Commit": sha, "ETag": f'"{meta["oid"]}"',
                   "Content-Type": "application/octet-stream"}
        if "lfs" in meta:
            headers.update({"X-Linked-Etag": f'"{meta["lfs"]["oid"]}"',
                            "X-Linked-Size": str(meta["size"])})
        self._send(req, 200, data, body, headers)

    def _json(self, req: BaseHTTPRequestHandler, doc: Any, body: bool) -> None:
        self._send(req, 200, json.dumps(doc).encode(), body,
                   {"Content-Type": "application/json"})

    @staticmethod
    def _send(req: BaseHTTPRequestHandler, code: int, data: bytes, body: bool,
              headers: dict[str, str]) -> None:
        req.send_response(code)
        for key, value in headers.items():
            req.send_header(key, value)
        req.send_header("Content-Length", str(len(data)))
        req.end_headers()
        if body:
            req.wfile.write(data)


@contextmanager
def loopback_hub() -> Iterator[LoopbackHub]:
    """A started :class:`LoopbackHub`, stopped afterwards."""
    hub = LoopbackHub().start()
    try:
        yield hub
    finally:
        hub.stop()
