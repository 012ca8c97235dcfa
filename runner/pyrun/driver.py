# The agentd Python driver. The daemon starts `python3 -c BOOTSTRAP`; the
# bootstrap reads this file from fd 3 and runs it. From then on fd 3 carries
# the daemon's requests and fd 4 the driver's replies, each a frame of a
# 4-byte big-endian length and a JSON object. The user's code writes to the
# real fds 1 and 2, which the daemon reads itself, so its output stays
# byte-exact and apart from these control messages.
#
# Requests:  {"op": "run", "code", "cwd", "env", "seq"} | {"op": "packages"}
# Replies:   {"ev": "ready", "pid", "version"}
#            {"ev": "result", "repr"} | {"ev": "error", "name", "value", "traceback"}
#            {"ev": "done", "failed"} | {"ev": "packages", "packages": [[name, version]]}
#
# Before each reply that ends or annotates a run, the driver flushes
# sys.stdout and sys.stderr: everything the code printed is in the pipes
# before the daemon reads the reply.
#
# Compatible with Python 3.8 and later.

import ast
import builtins
import json
import linecache
import os
import signal
import struct
import sys
import traceback
import types

DRIVER_FILE = "<agentd-driver>"
REPR_LIMIT = 64 * 1024
TRACEBACK_LIMIT = 64 * 1024
VALUE_LIMIT = 16 * 1024
LINECACHE_LIMIT = 1 << 20  # source kept for tracebacks, per run


def _cut(s, limit):
    if len(s) <= limit:
        return s
    return s[:limit] + "... [%d more characters]" % (len(s) - limit)


def _cut_head(s, limit):
    if len(s) <= limit:
        return s
    return "[%d characters cut] ...%s" % (len(s) - limit, s[-limit:])


def _dup_high(fd):
    """A close-on-exec duplicate of fd, numbered 100 or more if it can be."""
    try:
        import fcntl
        return fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 100)
    except (ImportError, OSError):
        return os.dup(fd)


class Driver:
    def __init__(self):
        # Move the control pipes to high non-inheritable descriptors, so
        # that the code's own files get the usual numbers and programs it
        # execs do not hold the pipes.
        self.cin = _dup_high(3)
        self.cout = _dup_high(4)
        os.close(3)
        os.close(4)
        # Keep the original stdout/stderr pipes, to repair fds 1 and 2 if
        # the code closes or replaces them.
        self.saved = {1: _dup_high(1), 2: _dup_high(2)}
        self.pid = os.getpid()
        self.running = False
        self.seq = 0
        self.loop = None
        main = types.ModuleType("__main__")
        main.__builtins__ = builtins
        sys.modules["__main__"] = main
        self.globals = main.__dict__
        sys.argv = [""]
        # Line-buffered like a terminal: a print arrives as one write; the
        # driver flushes whatever is left before it reports on the run.
        for f in (sys.stdout, sys.stderr):
            try:
                f.reconfigure(line_buffering=True)
            except Exception:
                pass

    # --- control pipe -------------------------------------------------

    def _read_exact(self, n):
        buf = bytearray()
        while len(buf) < n:
            chunk = os.read(self.cin, min(n - len(buf), 1 << 20))
            if not chunk:
                raise EOFError
            buf += chunk
        return bytes(buf)

    def recv(self):
        (n,) = struct.unpack(">I", self._read_exact(4))
        return json.loads(self._read_exact(n))

    def send(self, msg):
        data = json.dumps(msg).encode("utf-8")
        data = struct.pack(">I", len(data)) + data
        while data:
            n = os.write(self.cout, data)
            data = data[n:]

    # --- signals and streams ------------------------------------------

    def _sigint(self, signum, frame):
        # The daemon interrupts a run that went over its timeout. Outside
        # the code (a late signal) it is ignored.
        if self.running:
            raise KeyboardInterrupt

    def flush(self):
        for f in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
            try:
                if f is not None:
                    f.flush()
            except Exception:
                pass

    def repair_fds(self):
        for fd, saved in self.saved.items():
            try:
                a, b = os.fstat(fd), os.fstat(saved)
                if (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino):
                    continue
            except OSError:
                pass
            try:
                # What the code wrote while the fd was closed failed, but
                # stays in the stream's buffer: send it to /dev/null, then
                # put the pipe back.
                null = os.open(os.devnull, os.O_WRONLY)
                if null != fd:  # fd was closed: open() may have taken its number
                    os.dup2(null, fd)
                    os.close(null)
                for f in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
                    try:
                        if f is not None and f.fileno() == fd:
                            f.flush()
                    except Exception:
                        pass
                os.dup2(saved, fd)
            except OSError:
                pass

    # --- running code -------------------------------------------------

    def serve(self):
        signal.signal(signal.SIGINT, self._sigint)
        self.send({"ev": "ready", "pid": self.pid, "version": sys.version.split()[0]})
        while True:
            try:
                req = self.recv()
            except EOFError:
                return
            op = req.get("op")
            if op == "run":
                self.run(req)
            elif op == "packages":
                self.send({"ev": "packages", "packages": packages()})
            else:
                self.send({"ev": "error", "name": "ProtocolError", "value": "unknown op %r" % (op,), "traceback": ""})

    def run(self, req):
        failed = False
        try:
            cwd = req.get("cwd")
            if cwd:
                os.chdir(cwd)
            env = req.get("env")
            if env:
                os.environ.update(env)
            signal.signal(signal.SIGINT, self._sigint)
            failed = self.execute(req.get("code", ""), req.get("seq", 0))
        except BaseException as e:  # a failure of the driver's own steps (chdir, ...)
            self.running = False
            failed = True
            self.report(e)
        finally:
            self.running = False
        try:
            signal.signal(signal.SIGINT, self._sigint)
        except Exception:
            pass
        self.flush()
        self.repair_fds()
        self.send({"ev": "done", "failed": failed})

    def execute(self, code, seq):
        """Runs code; returns whether it failed (an error was sent)."""
        filename = "<run-%d>" % seq
        if len(code) <= LINECACHE_LIMIT:
            linecache.cache[filename] = (len(code), None, code.splitlines(True), filename)
        flags = getattr(ast, "PyCF_ALLOW_TOP_LEVEL_AWAIT", 0)
        try:
            tree = ast.parse(code, filename, "exec")
            last = None
            if tree.body and isinstance(tree.body[-1], ast.Expr) and not _silenced(code, tree.body[-1]):
                last = ast.Expression(tree.body.pop().value)
            body = compile(tree, filename, "exec", flags)
            tail = compile(last, filename, "eval", flags) if last is not None else None
        except BaseException as e:
            self.report(e)
            return True
        g = self.globals
        r = None
        try:
            self.running = True
            self.call(body, g)
            if tail is not None:
                value = self.call(tail, g)
                if value is not None:
                    r = repr(value)  # the code's __repr__: interruptible too
            self.running = False
        except SystemExit as e:
            self.running = False
            return self.report_exit(e)
        except BaseException as e:
            self.running = False
            self.report(e)
            return True
        if r is None:
            return False
        self.flush()
        self.send({"ev": "result", "repr": _cut(r, REPR_LIMIT)})
        return False

    def call(self, code, g):
        try:
            if code.co_flags & 0x80:  # CO_COROUTINE: the code uses top-level await
                if self.loop is None:
                    import asyncio
                    self.loop = asyncio.new_event_loop()
                    asyncio.set_event_loop(self.loop)
                return self.loop.run_until_complete(eval(code, g))
            return eval(code, g)
        except BaseException as e:
            if os.getpid() != self.pid:
                self.exit_fork(e)
            raise
        finally:
            if os.getpid() != self.pid:
                self.exit_fork(None)

    def exit_fork(self, e):
        """Ends a fork of the code that returned into the driver, as Python
        would end a script: it must not talk to the daemon."""
        status = 0
        if isinstance(e, SystemExit):
            if e.code is not None and not isinstance(e.code, int):
                sys.stderr.write("%s\n" % (e.code,))
                status = 1
            elif e.code:
                status = e.code
        elif e is not None:
            traceback.print_exception(type(e), e, e.__traceback__)
            status = 1
        self.flush()
        os._exit(status & 0xFF)

    def report_exit(self, e):
        code = e.code
        if code is None or code == 0:
            return False
        self.flush()
        self.send({"ev": "error", "name": "SystemExit", "value": _cut(str(code), VALUE_LIMIT), "traceback": ""})
        return True

    def report(self, e):
        tb = e.__traceback__
        while tb is not None and tb.tb_frame.f_code.co_filename == DRIVER_FILE:
            tb = tb.tb_next
        try:
            text = "".join(traceback.format_exception(type(e), e, tb))
        except BaseException:
            text = ""
        try:
            value = str(e)
        except BaseException:
            value = "<exception str() failed>"
        self.flush()
        self.send({
            "ev": "error",
            "name": type(e).__name__,
            "value": _cut(value, VALUE_LIMIT),
            "traceback": _cut_head(text, TRACEBACK_LIMIT),
        })


def _silenced(code, stmt):
    """Whether a trailing expression ends with a semicolon, which asks (as
    in IPython) not to show its value."""
    end_line = getattr(stmt, "end_lineno", None)
    if end_line is None:
        return False
    lines = code.splitlines()
    if end_line > len(lines):
        return False
    rest = lines[end_line - 1].encode("utf-8", "surrogatepass")[stmt.end_col_offset:]
    return rest.lstrip().startswith(b";")


def packages():
    try:
        from importlib import metadata
    except ImportError:
        return []
    seen = {}
    for dist in metadata.distributions():
        try:
            name = dist.metadata["Name"]
            version = dist.version
        except Exception:
            continue
        if name and name.lower() not in seen:
            seen[name.lower()] = [name, version or ""]
    return sorted(seen.values(), key=lambda p: p[0].lower())


Driver().serve()
