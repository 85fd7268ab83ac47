"""A run as a person sees it on a console: the runner's :class:`~swarm_cli.run.Watcher`
that brings up the progress view (display.py), the call log of ``--verbose``, and the
warnings and errors the runner reports; and :func:`run_job`, a run with all of that."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

from rich.console import Console
from rich.text import Text

from .display import STORM_WORDS, Progress, choose_progress, duration
from .events import Answered, Listener, OutageBegan, Recovered, Subscriber
from .outage import error_name, outage_words_of
from .outcome import Kind
from .report import Pair, Report
from .run import ActionFactory, Classify, Job, Watcher, run
from .stats import STORM_LASTING, Stats
from .text import literal


class CallLog(Subscriber):
    """``--verbose``: one line per call, as it is answered (or given up on)."""

    def __init__(self, console: Console, action: str, pair: Pair, several: bool) -> None:
        self.console = console
        self.prefix = f"{action} {pair.label} " if several else f"{action} "

    def on_answered(self, event: Answered) -> None:
        o = event.outcome
        if o is None or o.kind is Kind.SUCCEEDED:
            what = "ok"
        elif o.code in (None, "HttpError") and o.http_status is not None:
            # A gateway's page has no code: its status names it, and what it counted as is
            # said beside ("HTTP 503 (throttled)": a 503 with no body is a throttle).
            what = f"{error_name(o.code, o.http_status)} ({o.kind.value})"
        else:
            what = literal(o.code or o.kind.value)
        ids = literal(",".join(event.ids[:3])) + (
            f",…(+{len(event.ids) - 3})" if len(event.ids) > 3 else ""
        )
        self.console.print(
            f"{self.prefix}{len(event.ids)} ID(s) {ids} · {event.latency * 1000:.0f} ms · "
            f"{what} · cwnd {event.cwnd:.1f} · {event.phase}",
            highlight=False,
            markup=False,
        )


class OutageNote(Subscriber):
    """With no progress view (a look-up before or after a run): one line when an outage
    begins and one when it ends, so that a wait of up to --max-outage is not silent."""

    def __init__(self, console: Console, title: str, pair: Pair, several: bool) -> None:
        self.console = console
        self.prefix = f"{title} in {pair.label}" if several else title
        self._storm: float | None = None  # since when every answer is a throttle
        self._said = False

    def on_outage(self, event: OutageBegan) -> None:
        self.console.print(
            f"{self.prefix}: OUTAGE: {literal(outage_words_of(event.outcome))}, probing",
            markup=False,
            highlight=False,
        )

    def on_recovered(self, event: Recovered) -> None:
        self.console.print(f"{self.prefix}: the endpoint answers again", markup=False)

    def on_answered(self, event: Answered) -> None:
        # Every answer a throttle for long (a 503 with no body from a balancer, say): said
        # once per storm, as the progress view would.
        throttled = event.outcome is not None and event.outcome.kind is Kind.THROTTLED
        if not throttled:
            self._storm, self._said = None, False
            return
        self._storm = event.at if self._storm is None else self._storm
        if not self._said and event.at - self._storm >= STORM_LASTING:
            self._said = True
            self.console.print(
                f"{self.prefix}: every call throttled for {duration(event.at - self._storm)}: "
                f"{STORM_WORDS}; nothing is lost, swarm goes on probing",
                markup=False,
                highlight=False,
            )


class ConsoleWatcher(Watcher):
    """A run on a console: the progress view (live, plain lines or none) while the pairs
    run, the call log with ``--verbose``, and the runner's warnings and errors."""

    def __init__(self, console: Console, job: Job) -> None:
        self.console = console
        self.job = job
        self._view: Progress | None = None

    def subscribers(self, pair: Pair, several: bool) -> Sequence[Listener]:
        sinks = self.job.options.sinks
        out: list[Listener] = []
        if sinks.progress == "none":
            title = self.job.title or self.job.action.name
            out.append(OutageNote(self.console, title, pair, several))
        if sinks.verbose:
            out.append(CallLog(self.console, self.job.action.name, pair, several))
        return out

    def on_start(self, lanes: Sequence[tuple[str, Stats]]) -> None:
        o = self.job.options
        sinks = o.sinks
        self._view = choose_progress(
            sinks.progress,
            self.console,
            list(lanes),
            self.job.title or self.job.action.name,
            endpoint=sinks.endpoint,
            badges=sinks.badges + (("DRY RUN",) if o.dry_run else ()),
            batch=None if o.tuning.auto_batch else o.tuning.batch_size,
            bound_rate=sinks.bound_rate,
            already_done=sinks.already_done,
            detail=sinks.verbose,
        )
        self._view.__enter__()

    def on_end(self) -> None:
        if self._view is not None:
            view, self._view = self._view, None
            view.__exit__(None, None, None)

    def on_no_trace(self, reason: str) -> None:
        self.console.print(
            Text.assemble(("warning:", "bold yellow"), f" no trace: {literal(reason)}")
        )

    def on_ledger_failed(
        self, message: str, sent: bool, unrecorded: Sequence[Mapping[str, object]]
    ) -> None:
        said = "no more calls were sent" if sent else "nothing was sent"
        self.console.print(Text.assemble(("error:", "bold red"), f" {literal(message)}; {said}"))
        if unrecorded:
            self.console.print(
                f"{len(unrecorded)} outcome(s) could not be recorded; here they are as "
                "ledger lines (keep them):"
            )
            for record in unrecorded:
                self.console.out(json.dumps(record, sort_keys=True), highlight=False)

    def on_lane_crashed(self, label: str, message: str, pending: int, in_ledger: bool) -> None:
        self.console.print(
            Text.assemble(
                ("error:", "bold red"),
                f" {literal(label)} stopped on an unexpected "
                f"{literal(message)}; its {pending} intent(s) not done are pending"
                + (" in the ledger" if in_ledger else ""),
            )
        )


def run_job(
    job: Job,
    make_action: ActionFactory,
    console: Console,
    *,
    classify: Classify | None = None,
) -> Report:
    """Run the job with its progress and messages on ``console``; return the report."""
    return run(job, make_action, ConsoleWatcher(console, job), classify=classify)
