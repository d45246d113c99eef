"""One `mactor -np N --max-restarts K pretrain_gpt ...` job watched line by line, with faults injected
into its ranks (scripts/soak_faults.py drives it); a restart is the launcher's whole-job one or, under
pretrain_gpt --inprocess-restart, its in-job one.

Every line the launcher prints is stamped with the time it arrived (the launcher forwards each
rank's lines as they come), so a fault's recovery time is the time from the signal to the arrival
of the first iteration line that the restarted job logs after it.
"""
import os
import re
import signal
import subprocess
import threading
import time

ITERATION = re.compile(r"iteration +(\d+)/ *(\d+) \|.*?\| lm loss: ([-+0-9.eE]+) \|")
RESTART = re.compile(r"mactor: the job failed \(exit status (-?\d+)\); starting it again \(restart (\d+) of")
# An in-job restart (pretrain_gpt --inprocess-restart): the failed rank replaced, the others restarted in place.
IN_JOB_RESTART = re.compile(r"mactor: rank \d+ (?:exited with status (-?\d+)|was killed by signal \d+).*; in-job restart \d+: (?:starting|spare)")


def rank_pids(launcher_pid):
    """{rank: pid} of the launcher's child processes, read from /proc (MACTOR_RANK in each environ)."""
    ranks = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                stat = f.read()
            fields = stat[stat.rindex(")") + 2:].split()
            if int(fields[1]) != launcher_pid or fields[0] == "Z":
                continue
            with open(f"/proc/{name}/environ", "rb") as f:
                env = dict(kv.split(b"=", 1) for kv in f.read().split(b"\0") if b"=" in kv)
            if env.get(b"MACTOR_SPARE", b"0") not in (b"", b"0"):
                continue  # a spare waiting (mactor --spares), not a rank
            ranks[int(env[b"MACTOR_RANK"])] = int(name)
        except (OSError, KeyError, ValueError, IndexError):
            continue  # gone meanwhile, or not a rank yet (between fork and exec)
    return ranks


def alive_in_session(pid, session):
    """Whether `pid` is a live (not zombie) process of `session` (the launcher's: pids are not reused
    into it)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
        fields = stat[stat.rindex(")") + 2:].split()
        return fields[0] != "Z" and int(fields[3]) == session
    except (OSError, ValueError, IndexError):
        return False


class WatchedJob:
    """The launcher's process, its stdout and stderr lines with their arrival times, and the
    iteration lines and restarts parsed from them."""

    def __init__(self, command, log_dir, env=None):
        os.makedirs(log_dir, exist_ok=True)
        self.lock = threading.Lock()
        self.iterations = []  # (arrival time, iteration, lm loss text)
        self.restarts = []  # (arrival time, exit status that caused it)
        self.seen_pids = set()
        self.started = time.monotonic()
        self.proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
                                     start_new_session=True)
        self.readers = [
            threading.Thread(target=self._read, args=(self.proc.stdout, os.path.join(log_dir, "stdout.txt")),
                             daemon=True),
            threading.Thread(target=self._read, args=(self.proc.stderr, os.path.join(log_dir, "stderr.txt")),
                             daemon=True),
        ]
        for r in self.readers:
            r.start()

    def _read(self, stream, path):
        with open(path, "w") as out:
            for raw in stream:
                now = time.monotonic()
                line = raw.decode(errors="replace")
                out.write(f"{now - self.started:10.3f} {line}")
                out.flush()
                m = ITERATION.search(line)
                r = RESTART.search(line) or IN_JOB_RESTART.search(line)
                with self.lock:
                    if m:
                        self.iterations.append((now, int(m.group(1)), m.group(3)))
                    if r:
                        self.restarts.append((now, int(r.group(1) or -9)))

    def running(self):
        return self.proc.poll() is None

    def ranks(self):
        """{rank: pid} now; every pid seen is remembered for the orphan check."""
        found = rank_pids(self.proc.pid)
        self.seen_pids.update(found.values())
        return found

    def snapshot(self):
        with self.lock:
            return list(self.iterations), list(self.restarts)

    def wait_until(self, predicate, timeout_s, poll_s=0.01):
        """Poll `predicate(iterations, restarts)` until true (returns True) or the timeout or the
        launcher's exit (returns False)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            its, rs = self.snapshot()
            if predicate(its, rs):
                return True
            if not self.running():
                self.finish_reading()
                return predicate(*self.snapshot())
            self.ranks()
            time.sleep(poll_s)
        return False

    def finish_reading(self):
        for r in self.readers:
            r.join(timeout=10)

    def stop(self):
        """Ends the whole job (launcher and ranks): SIGCONT first, so a stopped rank can die."""
        for pid in [p for p in self.seen_pids if alive_in_session(p, self.proc.pid)] + [self.proc.pid]:
            for sig in (signal.SIGCONT, signal.SIGKILL):
                try:
                    os.kill(pid, sig)
                except OSError:
                    pass
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except OSError:
            pass
        self.proc.wait()
        self.finish_reading()

    def orphans(self):
        """Rank processes still alive after the launcher exited."""
        return sorted(pid for pid in self.seen_pids if alive_in_session(pid, self.proc.pid))
