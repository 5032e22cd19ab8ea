"""The whole stack: KAI Scheduler in parallel with JobSet → Trainer (Trainer's controller needs JobSet's CRD),
or, without install, the verification of what is there; then what it runs, for the reports."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, TypeVar

from kai_conformance.clusters.install import jobset, kai, trainer
from kai_conformance.clusters.install.common import running_images
from kai_conformance.clusters.install.context import InstallContext
from kai_conformance.fixtures import errors, progress
from kai_conformance.fixtures.removal.cancellation import cancel_on, watched

T = TypeVar("T")


def in_parallel(tasks: dict[str, Callable[[], T]], *, cancellable: bool = False) -> dict[str, T]:
    """Run independent tasks in threads and return their results; raise when any failed, naming each failure.

    Daemon threads: Ctrl-C interrupts the wait at once and the run ends without waiting for a long install. With
    ``cancellable`` (tasks that make objects on the cluster and remove them in ``finally``, such as the behaviour
    probes), a Ctrl-C or SIGTERM is passed on to the tasks' waits (fixtures/removal/cancellation.py) and the main thread
    waits for them to remove what they made before it goes on interrupted; a second one stops that wait.
    """
    results: dict[str, T] = {}
    failures: dict[str, BaseException] = {}
    interrupted = threading.Event()
    inherited = watched()
    ended = {name: threading.Event() for name in tasks}

    def work(name: str, task: Callable[[], T]) -> None:
        try:
            if cancellable:
                cancel_on(interrupted, *inherited)
            results[name] = task()
        except BaseException as exc:  # reported by the caller's thread
            failures[name] = exc
        finally:
            ended[name].set()

    threads = [threading.Thread(target=work, args=item, name=f"kai-conformance-{item[0]}", daemon=True)
               for item in tasks.items()]  # fmt: skip
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    except KeyboardInterrupt:
        if not cancellable:
            raise
        interrupted.set()
        progress.report(f"interrupted: {', '.join(tasks)} removing what they made")
        # Each task's own end, not Thread.join: a join the interruption broke leaves the thread marked stopped while it
        # still runs (CPython 3.11's bpo-45274 handling releases the running thread's lock), and a later join returns
        # at once, before the task removed what it made (seen under load: the self-test's probe still had its object).
        for name, thread in zip(tasks, threads, strict=True):
            if thread.ident is not None:  # started, even if the interruption came inside its start()
                ended[name].wait()
        raise
    if len(failures) == 1:
        raise next(iter(failures.values()))
    if failures:
        kind = errors.UsageError if all(isinstance(e, errors.UsageError) for e in failures.values()) else None
        message = "several steps failed:\n" + "\n".join(f"- {name}: {exc}" for name, exc in failures.items())
        raise (kind or errors.InfrastructureError)(message)
    return results


def install_stack(ctx: InstallContext) -> dict[str, Any]:
    def workloads() -> dict[str, Any]:
        return {"jobset": jobset.install(ctx), "trainer": trainer.install(ctx)}

    results = in_parallel({"KAI Scheduler": lambda: kai.install(ctx), "JobSet and Trainer": workloads})
    return _with_images(ctx, {"kai": results["KAI Scheduler"], **results["JobSet and Trainer"]})


def verify_stack(ctx: InstallContext) -> dict[str, Any]:
    results = in_parallel({
        "kai": lambda: kai.verify(ctx), "jobset": lambda: jobset.verify(ctx), "trainer": lambda: trainer.verify(ctx),
    })  # fmt: skip
    return {name: results[name] for name in ("kai", "jobset", "trainer")}  # images: those of the Deployments found


def _with_images(ctx: InstallContext, components: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Add image → digest (pod status imageID) of what each installed component runs (its own namespaces)."""
    kube = ctx.kube_factory()
    for record in components.values():
        namespaces = {ref.split("/", 1)[0] for ref in record.get("deployments", [])}
        images = running_images(kube, namespaces)
        if images:
            record["images"] = images
    return components
