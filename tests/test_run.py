"""The run's identity and state directory: fresh for every run that runs cases, shared with xdist workers."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from kai_conformance.fixtures.run import configure_run, run_context, start_run, started, worker_input


def config(**attributes: object) -> SimpleNamespace:
    return SimpleNamespace(stash=pytest.Stash(), **attributes)


def stale_state(report_dir: Path) -> Path:
    state = report_dir / ".state"
    (state / "records").mkdir(parents=True)
    (state / "cluster.json").write_text('{"provider": "kind", "name": "gone", "kubeconfig": "/x", "ready": true}')
    (state / "records" / "main-00000.json").write_text("{}")
    return state


def test_a_run_that_runs_cases_never_sees_a_previous_runs_state(tmp_path: Path) -> None:
    state = stale_state(tmp_path)
    cfg = config()
    configure_run(cfg, tmp_path)
    assert not started(cfg)
    run = start_run(cfg)
    assert run.state_dir == state
    assert run.is_main
    assert list(state.iterdir()) == []
    assert started(cfg)


def test_deciding_the_run_touches_no_file(tmp_path: Path) -> None:
    """Preflight may still stop the run, --collect-only runs nothing: the last run's state stays, none is made."""
    state = stale_state(tmp_path / "used")
    configure_run(config(), tmp_path / "used")
    assert (state / "cluster.json").exists()
    assert (state / "records" / "main-00000.json").exists()
    run = configure_run(config(), tmp_path / "fresh")
    assert run.state_dir == tmp_path / "fresh" / ".state"
    assert not (tmp_path / "fresh").exists()


def test_workers_share_the_main_process_identity(tmp_path: Path) -> None:
    main = configure_run(config(), tmp_path)
    worker_config = config(workerinput={"kai_conformance_run": worker_input(main), "workerid": "gw1"})
    worker = configure_run(worker_config, tmp_path / "ignored")
    assert (worker.run_id, worker.report_dir, worker.state_dir) == (main.run_id, main.report_dir, main.state_dir)
    assert worker.worker == "gw1"
    assert not worker.is_main
    assert run_context(worker_config) is worker
