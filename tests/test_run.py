"""The run's identity and state directory: fresh for every run that runs cases, shared with xdist workers."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from fixtures.run import configure_run, run_context, worker_input


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
    run = configure_run(config(), tmp_path, fresh=True)
    assert run.state_dir == state
    assert run.is_main
    assert list(state.iterdir()) == []


def test_collect_only_leaves_the_last_runs_state_alone(tmp_path: Path) -> None:
    state = stale_state(tmp_path)
    configure_run(config(), tmp_path, fresh=False)
    assert (state / "cluster.json").exists()
    assert (state / "records" / "main-00000.json").exists()


def test_workers_share_the_main_process_identity(tmp_path: Path) -> None:
    main = configure_run(config(), tmp_path)
    worker_config = config(workerinput={"kai_conformance_run": worker_input(main), "workerid": "gw1"})
    worker = configure_run(worker_config, tmp_path / "ignored")
    assert (worker.run_id, worker.report_dir, worker.state_dir) == (main.run_id, main.report_dir, main.state_dir)
    assert worker.worker == "gw1"
    assert not worker.is_main
    assert run_context(worker_config) is worker
