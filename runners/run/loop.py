"""The run loop: items x configs x models -> cells in the store, resumable and cancellable.

Crash safety: cells are written in small batches, each batch one store transaction
(store.write_cells); a (model, item, config) already in the store is skipped before any
work (done_keys), so re-running the same spec or `--resume RUN_ID` completes exactly the
missing cells, and a kill -9 loses at most the batch in flight.

Stopping: SIGINT (ctrl+c) and SIGTERM set a flag; `runs cancel` also sets the run's status
to `cancelling`, which the loop polls between batches. Either way the current batch is
finished and committed, and the run is marked `cancelled`. A second ctrl+c aborts at once.
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING

from fragility_tui.errors import InputError
from fragility_tui.harness.configs import CONFIG_IDS
from fragility_tui.items.item import DEFAULT_PER_BENCHMARK, Item
from fragility_tui.processes import process_start
from fragility_tui.store.runs import RunRecord, RunStatus, new_run_id
from fragility_tui.store.schema import utc_now
from fragility_tui.store.sink import CellSink
from runners.run import device_queue
from runners.run.admission import (check_examples, check_grid, check_settings,
                                   load_run_items)
from runners.backends.base import Backend, backend_for
from runners.run.failure import RunFailed, failure_reason
from runners.run.stopper import Stopper
from runners.run.events import Display, EventLog, default_events_path
from runners.models.provenance import gpu_info, new_session

if TYPE_CHECKING:
    from runners.plan.item_requests import PlannedItem


@dataclass
class RunSpec:
    """Everything that defines a run; stored in the run row so --resume can replay it."""

    models: list[str]
    items: list[str]
    grid: str
    per_benchmark: int | None = DEFAULT_PER_BENCHMARK
    seed: int = 0
    configs: list[str] = field(default_factory=lambda: list(CONFIG_IDS))
    quantize: str | None = None
    dtype: str = "auto"
    device: str = "auto"
    batch_size: int | None = None  # at most this many items per batch; None = no cap
    batch_tokens: int | None = None  # token budget (runners.plan.budget); None = from memory
    max_new_tokens: int = 16
    trust_remote_code: bool = False
    threads: int = 2
    prefix_reuse: bool = True
    name: str | None = None  # record the (one) model under this grid name
    prompt_mode: str = "auto"  # auto | chat | raw (runners.models.fingerprint.prompt_mode)
    shard: list[int] | None = None  # [i, n]: only the items of shard i of n (grid.items.shard_of)
    backend: str = "transformers"  # or vllm (runners.backends.vllm, experimental), or openai
    server: dict | None = None  # openai: base_url, served_model, api_key_env (never the key),...
    add_items: bool = False  # may add items to a grid that holds another item set
    overlap: bool = True  # plan and write on a host thread beside the model calls (host_work)
    plan_workers: int | None = None  # planning processes (plan_pool); None: by the device
    order_seed: int | None = None  # the item order's seed; None (older runs): `seed`
    # Only these items of the sampled set (after sampling, like `shard`): a chunk of a
    # sequential comparison (`compare A B --items SRC`, fragility_tui/commands/compare_live.py)
    item_uids: list[str] | None = None
    compare: dict | None = None  # the comparison a chunk's run belongs to: {pair, chunk}

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> "RunSpec":
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        return cls(**known)


def prepare_models(spec: RunSpec, store: CellSink, backend: Backend | None = None) -> list:
    """Each model's name and fingerprint from its spec, tokenizer and config files (no
    weights load), checked against the grid's model rows: a model whose cells were made
    with other settings is refused here (FingerprintMismatch, exit 2)."""
    if spec.name and len(spec.models) > 1:
        raise InputError("--name names one model; give a single --model with it",
                         field="--name")
    backend = backend or backend_for(spec.backend)
    prepared = backend.prepare(spec, device_queue.load_device(spec.device))
    names = [p.name for p in prepared]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise InputError(f"two --model specs would be recorded as {', '.join(twice)} in "
                         "one grid; run them separately, one with --name", field="--model")
    for p in prepared:
        store.check_model(spec.grid, p.name, p.fingerprint)
    return prepared


class Run:
    """One invocation of `fragility-tui run` (all its models), recorded as one run row."""

    def __init__(self, spec: RunSpec, store: CellSink, *, run_id: str | None = None,
                 events_path: str | None = None, display: str = "plain", wait: bool = True,
                 held=None, take_queued: bool = False, slot=None,
                 taken_over_after: str | None = None):
        """`held`: a HeldModels whose loaded models this run uses and adds to (a comparison's
        chunks, runners/run/held_models.py); None: each model loads for this run alone.
        `take_queued`, `slot`, `taken_over_after`: runners/run/handover.py."""
        from runners.run.held_models import HeldModels
        from runners.run.host_work import SerialSink

        # The host worker writes cells while this thread updates the run row: one at a time.
        self.spec, self.store = spec, SerialSink(store)
        self.display = Display(display)
        self.backend = backend_for(spec.backend)
        self.allocator = self.backend.configure_process(os.environ)  # before CUDA is used
        self.resuming = run_id is not None and taken_over_after is None
        # A served model's devices are the server's: nothing to hold or hand over.
        self.take_queued = take_queued and self.backend.info.device_slot
        self.held = held if held is not None or not self.take_queued else HeldModels(keep_one=True)
        self.successor: Run | None = None  # a queued run this process runs next (handover)
        self.taken_over_by: dict | None = None  # the holder that runs this queued run
        self.writers: list = []  # the writer locks of its models in the grid, once held
        # Before the run row (a resumed run's record included) and before any model: missing
        # items, a grid that cannot take the cells, a refused setting (or a busy device with
        # --no-wait) leave the store as it was (runners/run/admission.py).
        self.inputs = load_run_items(spec)
        check_examples(spec, self.inputs)  # +kN: enough items of each benchmark
        for warning in self.inputs.report.warnings:  # a folder mixing splits or versions
            print(f"warning: {warning}", file=sys.stderr, flush=True)
        note = check_grid(store, spec, self.inputs.set_hash)
        self.prepared = prepare_models(spec, store, self.backend)
        self.run_id = run_id or new_run_id()
        self.slot = None
        if not wait:  # --no-wait: a busy writer or device refuses before the run row
            self.writers = device_queue.wait_for_writers(
                store, self.run_id, spec.grid, [p.name for p in self.prepared],
                on_wait=lambda message: None, should_stop=lambda: False, wait=False)
        try:
            self.slot = (device_queue.take_now(store, self.run_id, spec.device,
                                               self.prepared[0].device) if not wait else slot)
        except InputError:
            self.release_slot()  # the writer locks just taken
            raise
        if run_id is None:
            spec.order_seed = spec.seed if spec.order_seed is None else spec.order_seed
            store.create_run({"run_id": self.run_id, "grid": spec.grid,
                              "model": ", ".join(spec.models), "status": RunStatus.QUEUED,
                              "spec": spec.to_dict()})
        previous = store.get_run(self.run_id) or RunRecord(self.run_id)
        # A parts folder keeps its runs' events beside them (a cluster driver reads them).
        self.events_path = events_path or previous.events_path or str(
            store.events_path_for(self.run_id) or default_events_path(self.run_id))
        self.events: EventLog | None = None
        self.tokens = int(previous.tokens or 0)  # accumulates over resumes
        self.seconds_before = float(previous.seconds or 0.0)
        self.provenance = dict(previous.provenance or {})
        self.started = time.monotonic()
        self.queued_s = 0.0  # this session's wait for its writer locks and device slot
        self.cells_total = 0
        self.cells_done = 0
        self.session_cells = 0  # this process's work, for rates and the ETA
        self.session_tokens = 0
        self.scoring_seconds = 0.0  # time spent scoring (rates exclude model loading)
        self.session = new_session(self.resuming)
        if taken_over_after:  # queued by its own process, run in this one's after that run
            self.session["taken_over_after_run"] = taken_over_after
        if note:
            print(f"note: {note}", file=sys.stderr, flush=True)

    # -- plumbing -------------------------------------------------------------------------

    def emit(self, event: str, **fields) -> None:
        record = self.events.emit(event, **fields) if self.events else {
            "event": event, "run_id": self.run_id, **fields}
        self.display.show(record)

    def _say(self, text: str) -> None:
        if self.display.mode != "none":
            print(f"\n{text}", file=sys.stderr, flush=True)

    def seconds(self) -> float:
        """The seconds the run worked, over its sessions: not the time it waited queued for
        a writer lock or a device slot (issue 58: two comparisons of one pair each counted
        the other's run as their own cost)."""
        return self.seconds_before + time.monotonic() - self.started - self.queued_s

    # -- the run --------------------------------------------------------------------------

    def execute(self) -> str:
        """Run to the end; returns the final status (finished | cancelled). Failures are
        recorded (run row + `failed` event) and re-raised for the CLI to report."""
        stopper = Stopper(self.store, self.run_id, self._say)
        stopper.install()
        try:
            self.events = EventLog(self.events_path, self.run_id)
            # Earlier sessions are kept as they are; this one is appended and updated.
            self.provenance["sessions"] = list(self.provenance.get("sessions") or []) + [
                self.session]
            waiting = time.monotonic()
            held = self._hold_slot(stopper)
            self.queued_s += time.monotonic() - waiting
            if self.taken_over_by is not None:
                from runners.run.handover import follow

                return follow(self, self.taken_over_by, stopper)
            if not held:
                status = RunStatus.CANCELLED  # cancelled while it waited for its device
            else:
                self.store.update_run(self.run_id, status=RunStatus.RUNNING, pid=os.getpid(),
                                      pid_started=process_start(os.getpid()),
                                      started_at=utc_now(), ended_at=None, error=None,
                                      events_path=self.events_path,
                                      device=self.slot.device if self.slot else None,
                                      note=None)
                status = self._execute(stopper)
        except BaseException as exc:
            if self.taken_over_by is not None:  # its record is the holder's to write
                raise
            reason = "interrupted" if isinstance(exc, KeyboardInterrupt) else failure_reason(exc)
            self._finish(RunStatus.FAILED if not isinstance(exc, KeyboardInterrupt)
                         else RunStatus.CANCELLED,
                         error=reason)
            if not isinstance(exc, KeyboardInterrupt):
                self.emit("failed", reason=reason)
            else:  # an abort, or a stop that shut a served model's requests in flight
                self.emit(RunStatus.CANCELLED, reason=reason, cells_done=self.cells_done,
                          cells_total=self.cells_total)
            self.release_slot()
            raise
        finally:
            stopper.restore()
        try:
            self._finish(status)
            self.emit(status, cells_done=self.cells_done, cells_total=self.cells_total,
                      tokens=self.tokens, seconds=self.seconds())
        finally:
            self._hand_over(status)
            self.release_slot()  # after the final status: a waiter never sees it running
        if self.events:
            self.events.close()
        return status

    def _hand_over(self, status: str) -> None:
        """Its writer locks go; its slot goes on to a queued run of the same model that this
        process runs next (self.successor), if there is one."""
        for writer in self.writers:
            writer.release()
        self.writers = []
        if status == RunStatus.FINISHED and self.take_queued:
            from runners.run.handover import next_run

            self.successor = next_run(self)
            if self.successor is not None:
                self.slot = None  # the successor's now

    def _should_stop_waiting(self, stopper: Stopper) -> bool:
        """Cancelled, or taken over by a process with its model loaded (handover.py)."""
        if stopper.should_stop():
            return True
        from runners.run.handover import accept

        self.taken_over_by = accept(self.store.slots_dir(), self.run_id)
        return self.taken_over_by is not None

    def _hold_slot(self, stopper: Stopper) -> bool:
        """Take the device's slot (fragility_tui/slots.py), waiting as `queued` while the
        device is busy; False when cancelled while waiting. Held until the run ends."""
        if not self._hold_writers(stopper):
            return False
        if not self.backend.info.device_slot:  # a server's devices are the server's to share
            return True
        if self.slot is None:
            self.slot = device_queue.wait_for(
                self.store, self.run_id, self.spec.device, self.prepared[0].device,
                on_wait=self._queued,
                should_stop=lambda: self._should_stop_waiting(stopper))
        if self.slot is None:
            return False
        for prepared in self.prepared:  # --device any: the GPU whose slot came free
            prepared.device = self.slot.device
        return True

    def _hold_writers(self, stopper: Stopper) -> bool:
        """The right to write each model's cells into the grid (fragility_tui/slots.py,
        try_writer), waiting as `queued` while another run writes them: two runs of one
        model into one grid would each compute every cell. Taken before the device slot,
        so a run waiting here holds no device; False when cancelled while waiting."""
        if self.writers:  # taken at once (--no-wait)
            return True
        writers = device_queue.wait_for_writers(
            self.store, self.run_id, self.spec.grid, [p.name for p in self.prepared],
            on_wait=lambda message: self._queued(None, message),
            should_stop=lambda: self._should_stop_waiting(stopper))
        self.writers = writers or []
        return writers is not None

    def _queued(self, device: str, message: str) -> None:
        if self.held is not None and (self.slot is None or self.slot.fd is None):
            self.held.release()  # another run may use the device: no idle weights beside it
        self.store.update_run(self.run_id, status=RunStatus.QUEUED, pid=os.getpid(),
                              pid_started=process_start(os.getpid()), device=device,
                              note=message, events_path=self.events_path)
        self.emit("queued", device=device, message=message)

    def release_slot(self) -> None:
        if self.slot is not None:
            self.slot.release()
        for writer in self.writers:
            writer.release()
        self.writers = []

    def _finish(self, status: str, error: str | None = None) -> None:
        self.session.update(ended_at=utc_now().isoformat(), status=status)
        self.provenance.update(tokens=self.tokens, seconds=self.seconds(),
                               ended_at=utc_now().isoformat())
        try:
            self.store.update_run(self.run_id, status=status, ended_at=utc_now(), error=error,
                                  tokens=self.tokens, seconds=self.seconds(),
                                  cells_done=self.cells_done, provenance=self.provenance)
        except Exception:  # the store itself may be what failed (disk full); keep the cause
            pass

    def _execute(self, stopper: Stopper) -> str:
        import torch

        spec = self.spec
        torch.set_num_threads(spec.threads)
        items, report = self.inputs.items, self.inputs.report
        set_hash, positions = self.inputs.set_hash, self.inputs.positions
        self._prepare_grid(items, set_hash, positions)
        names = [p.name for p in self.prepared]
        done = {name: self.store.done_keys(spec.grid, name) for name in names}
        wanted = {p.name: {(it.item_uid, c) for it in items for c in spec.configs
                           if c not in p.refused} for p in self.prepared}
        self.cells_total = sum(map(len, wanted.values()))
        self.cells_done = sum(len(done[n] & wanted[n]) for n in names)
        self.provenance.update(self._run_provenance(items, set_hash, report),
                               cuda_allocator=self.allocator)
        # The grid's model names (NAME+int4 for a quantised build), not the specs typed.
        self.store.update_run(self.run_id, model=", ".join(names), cells_total=self.cells_total,
                              cells_done=self.cells_done, provenance=self.provenance)
        self.emit("started", grid=spec.grid, models=names, items=len(items),
                  configs=spec.configs, cells_total=self.cells_total,
                  cells_done=self.cells_done, events_path=self.events_path,
                  resumed=self.resuming)
        for p in (p for p in self.prepared if p.refused):  # one line says which and why
            self.emit("configs_refused", model=p.name, configs=sorted(p.refused), reason=p.refusal)
        for prepared in self.prepared:
            if self._evaluate_model(prepared, items, done[prepared.name], stopper) == \
                    RunStatus.CANCELLED:
                return RunStatus.CANCELLED
            if stopper.should_stop():
                return RunStatus.CANCELLED
        return RunStatus.FINISHED

    def _prepare_grid(self, items: list[Item], set_hash: str, positions: list[int]) -> None:
        """Check the grid again and create it in one store transaction: it was checked in
        __init__, but a run that waited for its slot may find another run's grid now."""
        spec = self.spec
        self.store.claim_grid(spec.grid, items, positions=positions, seed=spec.seed,
                              set_hash=set_hash, description=f"runner: {', '.join(spec.items)}",
                              meta={"per_benchmark": spec.per_benchmark},
                              check=lambda meta: check_settings(spec, set_hash, meta))

    def _run_provenance(self, items, set_hash, report) -> dict:
        from runners.models.provenance import run_provenance

        return run_provenance(self.spec, items, set_hash, report, self.provenance,
                              self.backend.scoring_text())

    # -- one model ------------------------------------------------------------------------

    def _evaluate_model(self, prepared, items: list[Item], done: set,
                        stopper: Stopper) -> str:
        from runners.run.batch_loop import ModelBatches
        from runners.plan.item_requests import seeded_order

        spec = self.spec
        todo = [(it, [c for c in spec.configs if (it.item_uid, c) not in done
                      and c not in prepared.refused]) for it in items]
        todo = [(it, configs) for it, configs in todo if configs]
        if not todo:
            return RunStatus.FINISHED
        loaded, scorer = self._load(prepared)
        self.backend.watch_stop(scorer, stopper.should_stop)  # a served model's requests
        # a served model's request waiting to be retried: the progress line says so
        self.backend.watch_retries(scorer, lambda kind, **fields: self.emit(
            kind, model=prepared.name, **fields))
        # A seeded random order (spec.order_seed): any prefix of the run is a uniform sample
        # of its items, so a half-written grid gives unbiased provisional figures.
        todo = seeded_order(todo, spec.order_seed if spec.order_seed is not None else spec.seed)
        budget = self.backend.budget(spec, loaded, scorer)
        return ModelBatches(self, prepared.name, loaded, scorer, budget).run_batches(
            todo, stopper)

    def _load(self, prepared):
        from runners.plan import numerics

        t0 = time.monotonic()
        name = prepared.name
        if self.held is not None:
            (loaded, scorer), reused = self.held.load(self.backend, prepared, self.spec)
        else:
            (loaded, scorer), reused = self.backend.load(prepared, self.spec), False
        prov = dict(loaded.provenance, max_new_tokens=self.spec.max_new_tokens)
        prov["numerics"] = numerics.provenance(loaded.dtype, scorer)
        probe = prov["numerics"]["mask_probe"]
        self.provenance.setdefault("models", {})[name] = prov
        self.provenance["device"] = loaded.device
        self.session.update(device=loaded.device, gpu=gpu_info(loaded.device))
        self.session.setdefault("attn_implementation", {})[name] = prov["attn_implementation"]
        self.store.record_model(
            self.spec.grid, name, fingerprint=prepared.fingerprint, source=prov["source"],
            revision=prov["revision"], dtype=loaded.dtype,
            quantization=prepared.fingerprint["quantization"],
            base_model=loaded.base_model, provenance=prov)
        self.store.update_run(self.run_id, provenance=self.provenance)
        summary = (f"{prov['kind']}, {self.spec.backend}, {loaded.dtype}, {loaded.device}, "
                   f"{prov['prompt_mode']}, BOS {'added' if loaded.add_bos else 'not added'}"
                   + (f", {prov['quantization']['weights']}" if loaded.quantization else ""))
        self.emit("model_loaded", model=name, load_s=time.monotonic() - t0, summary=summary,
                  reused=reused)
        if probe.get("ran") and not probe.get("passed"):  # an event and a warning line
            self.emit("probe_failed", model=name, **{k: v for k, v in probe.items()
                                                      if k not in ("ran", "passed")})
        return loaded, scorer

    def score_chunk(self, loaded, scorer, chunk: list["PlannedItem"], max_slots: int):
        """The batch's model calls (the main thread's part of a batch)."""
        gen = [r for planned in chunk for r in planned.gen]
        lik = [r for planned in chunk for r in planned.lik]
        return scorer.score(gen, lik, max_slots=max_slots)

    def report_progress(self, model: str, batch_cells: int, batch_tokens: int) -> None:
        elapsed = time.monotonic() - self.started
        self.session_cells += batch_cells
        self.session_tokens += batch_tokens
        remaining = self.cells_total - self.cells_done
        per_cell = self.scoring_seconds / max(1, self.session_cells)
        eta = per_cell * remaining if remaining > 0 else 0.0
        self.store.update_run(self.run_id, cells_done=self.cells_done, tokens=self.tokens,
                              seconds=self.seconds(), provenance=self.provenance)
        self.emit("batch", model=model, cells_done=self.cells_done,
                  cells_total=self.cells_total, batch_cells=batch_cells, tokens=self.tokens,
                  tokens_per_s=self.session_tokens / max(self.scoring_seconds, 1e-9),
                  elapsed_s=elapsed, eta_s=eta)
