"""What users write today: a fixed pool of threads calling TerminateInstances, no window.

Run as a child process by ``compare.py`` so that its CPU time is measured the way
swarm's is (the child's own rusage), apart from the sandbox in the parent:

    python benchmarks/pool.py --mode standard --ids ids.txt --endpoint-url URL \
        --batch-size 1 --threads 32 --trace trace.jsonl

Credentials and region come from the environment (``AWS_ACCESS_KEY_ID`` ...).
Modes: ``legacy``, ``standard`` and ``adaptive`` are botocore's retry modes with
their default attempts; ``tenacity`` turns botocore's retries off and retries
throttles, 5xx and connection errors with tenacity (exponential backoff with full
jitter, bounded attempts), as a careful script would.

Prints one JSON object on stdout: calls (HTTP attempts), throttled (attempts
answered with a throttle), succeeded and gave_up (instances). ``--trace`` writes
JSON lines: ``{"t", "event": "sample", "in_flight", "busy"}`` every 50 ms (HTTP
requests outstanding, threads inside a call or its backoff) and ``{"t", "event":
"throttled"}`` per throttled attempt; ``t`` is seconds since ``--t0`` (a
``time.time()``, the launch of this process by the parent) so that the parent can
draw it on its own clock.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TextIO

import boto3
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError, ConnectionError, ReadTimeoutError
from tenacity import Retrying, retry_if_exception, stop_after_attempt, wait_random_exponential

MODES = ("legacy", "standard", "adaptive", "tenacity")
THROTTLE_CODES = frozenset(
    {
        "RequestLimitExceeded",
        "Throttling",
        "ThrottlingException",
        "TooManyRequestsException",
        "RequestThrottled",
        "SlowDown",
    }
)
SAMPLE_EVERY = 0.05


def is_throttle(status: int | None, code: str | None) -> bool:
    return status in (429, 503) or code in THROTTLE_CODES


def retryable(exc: BaseException) -> bool:
    """What the tenacity pool retries: throttles, server errors, no answer."""
    if isinstance(exc, ClientError):
        status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        code = exc.response.get("Error", {}).get("Code")
        return is_throttle(status, code) or (status is not None and status >= 500)
    return isinstance(exc, ConnectionError | ReadTimeoutError)


class Pool:
    def __init__(self, mode: str, endpoint: str, threads: int, t0: float) -> None:
        retries: dict[str, Any] = (
            {"total_max_attempts": 1} if mode == "tenacity" else {"mode": mode}
        )
        self.client = boto3.client(
            "ec2",
            endpoint_url=endpoint,
            config=Config(retries=retries, max_pool_connections=threads),
        )
        self.mode = mode
        self.t0 = t0
        self.lock = threading.Lock()
        self.in_flight = 0  # HTTP requests sent and not yet answered
        self.busy = 0  # threads inside a call, its retries and their backoff
        self.calls = 0
        self.throttled = 0
        self.throttle_times: list[float] = []
        events = self.client.meta.events
        events.register("before-send.ec2.TerminateInstances", self._sent)
        events.register("response-received.ec2.TerminateInstances", self._answered)

    def _sent(self, **_: Any) -> None:
        with self.lock:
            self.in_flight += 1
            self.calls += 1

    def _answered(
        self, response_dict: dict[str, Any] | None, parsed_response: Any, **_: Any
    ) -> None:
        status = None if response_dict is None else response_dict.get("status_code")
        code = None
        if isinstance(parsed_response, dict):
            code = parsed_response.get("Error", {}).get("Code")
        with self.lock:
            self.in_flight -= 1
            if is_throttle(status, code):
                self.throttled += 1
                self.throttle_times.append(time.time() - self.t0)

    def _call(self, chunk: list[str]) -> None:
        self.client.terminate_instances(InstanceIds=chunk)

    def one(self, chunk: list[str]) -> int:
        """Terminate one batch; the number of instances given up on."""
        with self.lock:
            self.busy += 1
        try:
            if self.mode == "tenacity":
                for attempt in Retrying(
                    retry=retry_if_exception(retryable),
                    wait=wait_random_exponential(multiplier=0.1, max=10),
                    stop=stop_after_attempt(10),
                    reraise=True,
                ):
                    with attempt:
                        self._call(chunk)
            else:
                self._call(chunk)
            return 0
        except (ClientError, BotoCoreError):
            return len(chunk)
        finally:
            with self.lock:
                self.busy -= 1


def sample(pool: Pool, out: TextIO, done: threading.Event) -> None:
    seen = 0
    while True:
        finished = done.wait(SAMPLE_EVERY)
        with pool.lock:
            point = {"in_flight": pool.in_flight, "busy": pool.busy}
            marks = pool.throttle_times[seen:]
            seen = len(pool.throttle_times)
        now = round(time.time() - pool.t0, 4)
        for t in marks:
            out.write(json.dumps({"t": round(t, 4), "event": "throttled"}) + "\n")
        out.write(json.dumps({"t": now, "event": "sample", **point}) + "\n")
        if finished:
            return


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mode", choices=MODES, required=True)
    parser.add_argument("--ids", required=True, help="file of instance IDs, one per line")
    parser.add_argument("--endpoint-url", required=True)
    parser.add_argument("--batch-size", type=int, default=1)
    parser.add_argument("--threads", type=int, default=32)
    parser.add_argument("--trace", help="write in-flight samples and throttles here (JSONL)")
    parser.add_argument("--t0", type=float, default=None, help="time.time() of the launch")
    args = parser.parse_args(argv)
    t0 = time.time() if args.t0 is None else args.t0
    with open(args.ids, encoding="utf-8") as handle:
        ids = [line.strip() for line in handle if line.strip()]
    pool = Pool(args.mode, args.endpoint_url, args.threads, t0)
    batches = [ids[k : k + args.batch_size] for k in range(0, len(ids), args.batch_size)]
    done = threading.Event()
    sampler = None
    trace = open(args.trace, "w", encoding="utf-8") if args.trace else None  # noqa: SIM115
    if trace is not None:
        sampler = threading.Thread(target=sample, args=(pool, trace, done), daemon=True)
        sampler.start()
    try:
        with ThreadPoolExecutor(args.threads) as executor:
            gave_up = sum(executor.map(pool.one, batches))
    finally:
        done.set()
        if sampler is not None:
            sampler.join()
        if trace is not None:
            trace.close()
    result = {
        "mode": args.mode,
        "calls": pool.calls,
        "throttled": pool.throttled,
        "succeeded": len(ids) - gave_up,
        "gave_up": gave_up,
    }
    sys.stdout.write(json.dumps(result) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
