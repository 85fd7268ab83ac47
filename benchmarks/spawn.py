"""Run one command and say what it cost: ``python spawn.py RESULT.json -- ARGV...``.

``compare.py`` launches every client through this small process rather than
directly: on Linux a child's peak RSS (``ru_maxrss``) starts at the peak of the
memory it was forked from, so a client forked straight from the benchmark (which
holds the sandbox, moto and every ID) would report the benchmark's memory as its
own. Forked from here, it starts from this process's few megabytes.

Writes ``{"launched", "ended"}`` (``time.monotonic()``, the same clock as the
parent's on Linux), ``"cpu_s"`` (user + system), ``"max_rss_kib"`` and
``"exit_code"`` of the command alone, and exits with its exit code.
"""

import json
import os
import sys
import time


def main() -> int:
    result, separator, *argv = sys.argv[1:]
    assert separator == "--" and argv, __doc__
    launched = time.monotonic()
    pid = os.fork()
    if pid == 0:
        try:
            os.execvp(argv[0], argv)
        finally:
            os._exit(127)
    _, status, usage = os.wait4(pid, 0)
    ended = time.monotonic()
    code = os.waitstatus_to_exitcode(status)
    with open(result, "w", encoding="utf-8") as handle:
        json.dump(
            {
                "launched": launched,
                "ended": ended,
                "cpu_s": usage.ru_utime + usage.ru_stime,
                "max_rss_kib": usage.ru_maxrss,
                "exit_code": code,
            },
            handle,
        )
    return code if code >= 0 else 128 - code


if __name__ == "__main__":
    sys.exit(main())
