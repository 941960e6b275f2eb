"""Trees in and out of a sandbox as tar streams, spooled through a temporary file so memory stays bounded."""
from __future__ import annotations

import os
import secrets
import tarfile
import tempfile
from typing import TYPE_CHECKING

from .errors import invalid
from .names import pax_names

if TYPE_CHECKING:
    from .files import SandboxFiles, WriteInfo

SPOOL_BYTES = 8 * 1024 * 1024
MAX_TAR_PAGES = 1 << 20


async def upload_tree(files: "SandboxFiles", local_path: str, sandbox_path: str) -> "WriteInfo":
    """A file goes as itself; a directory as a tar unpacked at ``sandbox_path``."""
    if not os.path.isdir(local_path):
        with open(local_path, "rb") as f:
            return await files.send(sandbox_path, f, "file", os.stat(local_path).st_mode & 0o7777)
    with tempfile.SpooledTemporaryFile(SPOOL_BYTES) as spool:
        with tarfile.open(fileobj=spool, mode="w", format=tarfile.PAX_FORMAT, encoding="utf-8", errors="surrogateescape") as tar:
            for name in sorted(os.listdir(local_path)):
                tar.add(os.path.join(local_path, name), arcname=name, recursive=True, filter=_exact_names)
        spool.seek(0)
        return await files.send(sandbox_path, spool, "tar")


def _exact_names(m: tarfile.TarInfo) -> tarfile.TarInfo:
    # A name that is not UTF-8 goes raw under hdrcharset=BINARY (tarfile's own doing) and in
    # warren's pax keys, which the node reads exactly.
    m.pax_headers.update(pax_names(m.name, m.linkname))
    return m


def _safe_member(m: tarfile.TarInfo, root: str) -> bool:
    if m.name.startswith("/") or ".." in m.name.split("/"):
        return False
    if not (m.isfile() or m.isdir() or m.issym()):
        return False
    target = os.path.realpath(os.path.join(root, m.name))
    return target == root or target.startswith(root + os.sep)


async def download_tree(files: "SandboxFiles", sandbox_path: str, local_path: str) -> None:
    """Reads the tar pages of ``sandbox_path`` and unpacks them under ``local_path`` (a file lands as ``local_path``)."""
    st = await files.stat(sandbox_path, follow=True)
    if st.type == "file":
        with open(local_path, "wb") as f:
            async for chunk in files.chunks(sandbox_path):
                f.write(chunk)
        os.chmod(local_path, st.mode & 0o7777)
        return
    download = secrets.token_hex(8)
    await files.call({"op": "tar-begin", "download": download, "path": sandbox_path})
    try:
        with tempfile.SpooledTemporaryFile(SPOOL_BYTES) as spool:
            for seq in range(MAX_TAR_PAGES):
                page = await files.call({"op": "tar-read", "download": download, "seq": seq})
                spool.write(bytes(page.get("data") or b""))
                if page.get("done"):
                    break
            spool.seek(0)
            os.makedirs(local_path, exist_ok=True)
            root = os.path.realpath(local_path)
            with tarfile.open(fileobj=spool, mode="r:", encoding="utf-8", errors="surrogateescape") as tar:
                for m in tar:
                    if not _safe_member(m, root):
                        raise invalid("path", f"the tree holds an entry that would land outside {local_path}: {m.name!r}")
                    if m.issym():
                        # A link is made as a link, and nothing is later written through it.
                        dest = os.path.join(root, m.name)
                        os.makedirs(os.path.dirname(dest), exist_ok=True)
                        if os.path.lexists(dest):
                            os.unlink(dest)
                        os.symlink(m.linkname, dest)
                        continue
                    parent = os.path.realpath(os.path.dirname(os.path.join(root, m.name)))
                    if parent != root and not parent.startswith(root + os.sep):
                        raise invalid("path", f"{m.name!r} would be written through a symlink")
                    tar.extract(m, root, set_attrs=True)
    finally:
        try:
            await files.call({"op": "tar-end", "download": download}, False)
        except Exception:
            pass  # dropped after 60 s idle anyway
