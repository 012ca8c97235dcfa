"""The build backend (no hub needed)."""

from __future__ import annotations

import os
import sys
import tempfile
import unittest
import zipfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "_build"))
import backend  # noqa: E402


class BackendTest(unittest.TestCase):
    def test_fallback_parser_agrees_with_tomllib(self) -> None:
        if sys.version_info < (3, 11):
            self.skipTest("tomllib is Python 3.11+")
        with open(os.path.join(backend.ROOT, "pyproject.toml")) as f:
            fallback = backend._project_fallback(f.read())
        full = backend._project()
        for key in ("name", "version", "description", "requires-python", "dependencies"):
            self.assertEqual(fallback[key], full[key], key)

    def test_wheel_has_the_package_stubs_and_types(self) -> None:
        with tempfile.TemporaryDirectory() as d:
            name = backend.build_wheel(d)
            self.assertEqual(name, "agentd-0.1.0-py3-none-any.whl")
            with zipfile.ZipFile(os.path.join(d, name)) as z:
                names = set(z.namelist())
                record = z.read("agentd-0.1.0.dist-info/RECORD").decode()
                meta = z.read("agentd-0.1.0.dist-info/METADATA").decode()
        for want in ["agentd/__init__.py", "agentd/aio.py", "agentd/py.typed", "agentd/v1/process_pb2.pyi",
                     "agentd/v1/process_pb2_grpc.py"]:
            self.assertIn(want, names)
        self.assertFalse([n for n in names if "__pycache__" in n or n.startswith("tests/")], names)
        self.assertEqual(len(record.strip().splitlines()), len(names))
        self.assertIn("Requires-Dist: grpcio>=1.51", meta)
