"""Finding, among records read, the runs whose write-ahead blocks were cut short by a kill."""

from __future__ import annotations

from dataclasses import dataclass

from .record import Record


@dataclass(frozen=True)
class CutShort:
    """A run killed while writing its intents ahead: none of its calls were sent."""

    run: str
    recorded: int
    intents: int

    def describe(self) -> str:
        return (
            f"run {self.run} was stopped while recording its intents ({self.recorded} of "
            f"{self.intents} recorded) and sent nothing: run it again from its own ID list "
            "(this ledger cannot show what the rest were; once that list has run again, swarm "
            "ledger failed --ids LIST LEDGER exits 0 if nothing of it is left)"
        )


class WriteAheadCheck:
    """Finds, among records streaming past, the runs whose write-ahead was cut short.

    A run writes one block of ``pending`` records per call of
    :meth:`LedgerWriter.write_ahead`, each record carrying the block's first
    seq (``block``) and size (``intents``). A kill leaves a prefix of the
    file, so a cut block lacks its last seq, and no record of its run with a
    larger seq exists (the writer puts those on disk only after the whole
    block). A block is whole when any of these shows: all of its records,
    its last one, or a later record of its run. Asking for more than the
    count is what keeps merged ledgers (one record per intent, so a whole
    block with some intents decided by other runs) from being reported.

    A run that declared ``run_intents`` is also cut short when its blocks
    hold fewer intents than that and nothing of the run follows its last
    block: it was killed between two blocks.

    Records of older swarms carry no ``block``: their run wrote one block,
    taken to start at the smallest seq seen. Records seen twice (the same
    ledger passed twice) count once.
    """

    def __init__(self) -> None:
        # (run, block) -> declared size, and the seqs of it seen.
        self._declared: dict[tuple[str, int | None], int] = {}
        self._seen: dict[tuple[str, int | None], set[int]] = {}
        self._run_intents: dict[str, int] = {}
        self._last_seq: dict[str, int] = {}
        self._ids: dict[str, set[str]] = {}  # run -> the IDs any record of it names

    def __call__(self, record: Record) -> Record:
        run = record.run
        if record.seq > self._last_seq.get(run, -1):
            self._last_seq[run] = record.seq
        self._ids.setdefault(run, set()).add(record.id)
        if record.intents is not None and record.status == "pending":
            key = (run, record.block)
            self._declared[key] = max(record.intents, self._declared.get(key, 0))
            self._seen.setdefault(key, set()).add(record.seq)
            if record.run_intents is not None:
                self._run_intents[run] = max(record.run_intents, self._run_intents.get(run, 0))
        return record

    def cut_short(self) -> list[CutShort]:
        recorded: dict[str, int] = {}
        declared: dict[str, int] = {}
        block_end: dict[str, int] = {}
        cut: set[str] = set()
        for (run, block), size in self._declared.items():
            seen = self._seen[(run, block)]
            last = (min(seen) if block is None else block) + size - 1
            recorded[run] = recorded.get(run, 0) + len(seen)
            declared[run] = declared.get(run, 0) + size
            block_end[run] = max(last, block_end.get(run, last))
            whole = len(seen) >= size or last in seen or self._last_seq[run] > last
            if not whole:
                cut.add(run)
        for run, total in self._run_intents.items():
            if declared[run] < total and self._last_seq[run] <= block_end[run]:
                cut.add(run)
        return [
            CutShort(run, recorded[run], max(declared[run], self._run_intents.get(run, 0)))
            for run in recorded
            if run in cut
        ]

    def unaccounted(self) -> int:
        """Intents of whole blocks that no record read shows, and of blocks of which no
        record is read at all (a run's declared ``run_intents`` over its blocks' sizes).
        A ledger as written holds every one (outcomes are appended, never replace an
        intent); a merged ledger keeps one record per intent, so it lacks those decided
        by later records. Where damaged lines were skipped, these may be among them.
        An intent whose own line is damaged is accounted for all the same when a record
        of its outcome names its ID: no more are counted for a run than its intents less
        the IDs its records name."""
        cut = {c.run for c in self.cut_short()}
        missing: dict[str, int] = {}
        declared: dict[str, int] = {}
        for (run, block), size in self._declared.items():
            if run not in cut:
                missing[run] = missing.get(run, 0) + max(size - len(self._seen[(run, block)]), 0)
                declared[run] = declared.get(run, 0) + size
        for run, total in self._run_intents.items():
            if run not in cut:
                missing[run] = missing.get(run, 0) + max(total - declared.get(run, 0), 0)
        unaccounted = 0
        for run, n in missing.items():
            intents = max(declared.get(run, 0), self._run_intents.get(run, 0))
            named = len(self._ids.get(run, ()))
            unaccounted += min(n, max(intents - named, 0))
        return unaccounted
