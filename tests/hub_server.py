"""A local Hugging Face hub for tests: the subset of the hub's HTTP API that huggingface_hub's
`HfApi.repo_info`, `HfApi.list_repo_tree` and `snapshot_download` use, over files held in memory.

    with LocalHub() as hub:
        commit = hub.add_commit("org/model", {"config.json": b"...", "model.safetensors": b"..."}, branch="main")
        # HF_ENDPOINT=hub.url: the real client code runs against it

Large files are served as LFS objects (ETag: the sha256 of their bytes, as the hub does); every request is
recorded in `hub.requests` as (method, path).
"""

from __future__ import annotations

import hashlib
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote, urlparse

LFS_SUFFIXES = (".safetensors", ".bin", ".pt", ".gguf", ".model")


class LocalHub:
    def __init__(self):
        self.repos: dict[str, dict] = {}  # repo id -> {"refs": {branch: commit}, "commits": {commit: {path: bytes}}}
        self.requests: list[tuple[str, str]] = []
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"

    def add_commit(self, repo: str, files: dict[str, bytes], branch: str = "main") -> str:
        """A new commit holding `files` on `branch`; returns its 40-hex id."""
        entry = self.repos.setdefault(repo, {"refs": {}, "commits": {}})
        commit = hashlib.sha1(json.dumps([repo, branch, len(entry["commits"]), sorted(files)]).encode()).hexdigest()
        entry["commits"][commit] = dict(files)
        entry["refs"][branch] = commit
        return commit

    def resolve(self, repo: str, revision: str) -> str | None:
        entry = self.repos.get(repo)
        if entry is None:
            return None
        if revision in entry["commits"]:
            return revision
        return entry["refs"].get(revision)

    def __enter__(self) -> LocalHub:
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc) -> None:
        self._server.shutdown()
        self._server.server_close()


def _tree_entry(path: str, data: bytes) -> dict:
    entry = {"type": "file", "path": path, "size": len(data), "oid": hashlib.sha1(data).hexdigest()}
    if path.endswith(LFS_SUFFIXES):
        entry["lfs"] = {"oid": hashlib.sha256(data).hexdigest(), "size": len(data), "pointerSize": 134}
    return entry


def _handler(hub: LocalHub):
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):  # quiet
            pass

        def _send(self, status: int, body: bytes = b"", headers: dict[str, str] | None = None, head: bool = False):
            self.send_response(status)
            for key, value in (headers or {}).items():
                self.send_header(key, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if not head:
                self.wfile.write(body)

        def _json(self, status: int, value) -> None:
            self._send(status, json.dumps(value).encode(), {"Content-Type": "application/json"})

        def _not_found(self, what: str, head: bool = False) -> None:
            self._send(
                404,
                json.dumps({"error": what}).encode(),
                {"Content-Type": "application/json", "X-Error-Code": "RepoNotFound"},
                head=head,
            )

        def _route(self, head: bool) -> None:
            url = urlparse(self.path)
            path = unquote(url.path)
            hub.requests.append((self.command, path))
            if path.startswith("/api/models/"):
                rest = path[len("/api/models/") :]
                if rest.count("/") == 1:  # no revision: the default branch
                    rest += "/revision/main"
                for marker in ("/revision/", "/tree/"):
                    if marker in rest:
                        repo, _, revision = rest.partition(marker)
                        revision = revision.split("/", 1)[0]
                        commit = hub.resolve(repo, revision)
                        if commit is None:
                            return self._not_found(f"{repo}@{revision}")
                        files = hub.repos[repo]["commits"][commit]
                        if marker == "/tree/":
                            return self._json(200, [_tree_entry(p, d) for p, d in sorted(files.items())])
                        return self._json(
                            200,
                            {
                                "id": repo,
                                "modelId": repo,
                                "sha": commit,
                                "private": False,
                                "siblings": [{"rfilename": p} for p in sorted(files)],
                            },
                        )
                return self._not_found(path)
            repo_and_file = path.lstrip("/")
            if "/resolve/" in repo_and_file:
                repo, _, rest = repo_and_file.partition("/resolve/")
                revision, _, name = rest.partition("/")
                commit = hub.resolve(repo, revision)
                files = hub.repos[repo]["commits"][commit] if commit else {}
                if name not in files:
                    return self._send(404, b"", {"X-Error-Code": "EntryNotFound"}, head=head)
                data = files[name]
                entry = _tree_entry(name, data)
                etag = entry["lfs"]["oid"] if "lfs" in entry else entry["oid"]
                return self._send(200, data, {"X-Repo-Commit": commit, "ETag": f'"{etag}"'}, head=head)
            return self._not_found(path)

        def do_GET(self):
            self._route(head=False)

        def do_HEAD(self):
            self._route(head=True)

    return Handler
