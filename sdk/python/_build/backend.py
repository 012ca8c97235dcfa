"""The package's PEP 517 build backend: this package is pure Python, so
the backend writes the wheel itself and needs nothing to build — which is
what lets ``pip install ./sdk/python`` work with no index (setuptools in
pip's isolated build environment would have to be downloaded).

Name, version, dependencies and the rest come from pyproject.toml's
[project] table."""

from __future__ import annotations

import base64
import hashlib
import io
import os
import re
import sys
import tarfile
import zipfile
from typing import Any, Dict, List, Optional, Tuple

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE = "agentd"
# What goes into the wheel from PACKAGE's tree.
SUFFIXES = (".py", ".pyi", "py.typed")


def _project() -> Dict[str, Any]:
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        raw = f.read()
    if sys.version_info >= (3, 11):
        import tomllib

        return dict(tomllib.loads(raw.decode())["project"])
    return _project_fallback(raw.decode())


def _project_fallback(text: str) -> Dict[str, Any]:
    """The few [project] keys used here, for Pythons before tomllib."""
    section = text.split("[project]", 1)[1].split("\n[", 1)[0]
    out: Dict[str, Any] = {}
    for key in ("name", "version", "description", "requires-python"):
        m = re.search(r'^%s\s*=\s*"([^"]*)"' % re.escape(key), section, re.M)
        if m:
            out[key] = m.group(1)
    m = re.search(r"^dependencies\s*=\s*\[([^\]]*)\]", section, re.M)
    out["dependencies"] = re.findall(r'"([^"]+)"', m.group(1)) if m else []
    return out


def _dist_name() -> Tuple[str, str]:
    p = _project()
    return re.sub(r"[-_.]+", "_", p["name"]).lower(), p["version"]


def _metadata() -> str:
    p = _project()
    lines = [
        "Metadata-Version: 2.1",
        f"Name: {p['name']}",
        f"Version: {p['version']}",
        f"Summary: {p.get('description', '')}",
    ]
    if p.get("requires-python"):
        lines.append(f"Requires-Python: {p['requires-python']}")
    for dep in p.get("dependencies", []):
        lines.append(f"Requires-Dist: {dep}")
    readme = os.path.join(ROOT, "README.md")
    body = ""
    if os.path.exists(readme):
        lines.append("Description-Content-Type: text/markdown")
        with open(readme, encoding="utf-8") as f:
            body = f.read()
    return "\n".join(lines) + "\n\n" + body


def _files() -> List[Tuple[str, str]]:
    """(archive name, path) of the package's files, sorted."""
    out = []
    for dirpath, dirnames, filenames in os.walk(os.path.join(ROOT, PACKAGE)):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
        for name in sorted(filenames):
            if name.endswith(SUFFIXES):
                path = os.path.join(dirpath, name)
                out.append((os.path.relpath(path, ROOT).replace(os.sep, "/"), path))
    return out


def _record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def _write_wheel(wheel_directory: str, entries: List[Tuple[str, bytes]]) -> str:
    dist, version = _dist_name()
    info = f"{dist}-{version}.dist-info"
    wheel = f"{dist}-{version}-py3-none-any.whl"
    entries = entries + [
        (f"{info}/METADATA", _metadata().encode()),
        (f"{info}/WHEEL", b"Wheel-Version: 1.0\nGenerator: agentd-build\nRoot-Is-Purelib: true\nTag: py3-none-any\n"),
        (f"{info}/top_level.txt", (PACKAGE + "\n").encode()),
    ]
    record = [_record_line(n, d) for n, d in entries] + [f"{info}/RECORD,,"]
    entries.append((f"{info}/RECORD", ("\n".join(record) + "\n").encode()))
    with zipfile.ZipFile(os.path.join(wheel_directory, wheel), "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in entries:
            zi = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
            zi.external_attr = 0o644 << 16
            zi.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(zi, data)
    return wheel


def get_requires_for_build_wheel(config_settings: Optional[Dict[str, Any]] = None) -> List[str]:
    """Nothing: the wheel is written with the standard library."""
    return []


get_requires_for_build_sdist = get_requires_for_build_wheel
get_requires_for_build_editable = get_requires_for_build_wheel


def build_wheel(
    wheel_directory: str,
    config_settings: Optional[Dict[str, Any]] = None,
    metadata_directory: Optional[str] = None,
) -> str:
    """PEP 517: the package's files and metadata as a py3-none-any wheel."""
    entries = []
    for name, path in _files():
        with open(path, "rb") as f:
            entries.append((name, f.read()))
    return _write_wheel(wheel_directory, entries)


def build_editable(
    wheel_directory: str,
    config_settings: Optional[Dict[str, Any]] = None,
    metadata_directory: Optional[str] = None,
) -> str:
    """PEP 660 (pip install -e): a wheel whose .pth puts the source on sys.path."""
    return _write_wheel(wheel_directory, [(f"__editable__.{PACKAGE}.pth", (ROOT + "\n").encode())])


def build_sdist(sdist_directory: str, config_settings: Optional[Dict[str, Any]] = None) -> str:
    """PEP 517: the source tree as name-version.tar.gz."""
    dist, version = _dist_name()
    base = f"{dist}-{version}"
    names = ["pyproject.toml", "README.md"] + [n for n, _ in _files()]
    for dirpath, dirnames, filenames in os.walk(os.path.join(ROOT, "_build")):
        dirnames[:] = [d for d in dirnames if d != "__pycache__"]
        names += [os.path.relpath(os.path.join(dirpath, f), ROOT) for f in sorted(filenames) if f.endswith(".py")]
    pkg_info = _metadata().encode()
    out = os.path.join(sdist_directory, base + ".tar.gz")
    with tarfile.open(out, "w:gz", format=tarfile.PAX_FORMAT) as tar:
        for name in names:
            path = os.path.join(ROOT, name)
            if os.path.exists(path):
                tar.add(path, arcname=f"{base}/{name}", recursive=False)
        ti = tarfile.TarInfo(f"{base}/PKG-INFO")
        ti.size = len(pkg_info)
        tar.addfile(ti, io.BytesIO(pkg_info))
    return base + ".tar.gz"
