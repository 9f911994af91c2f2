"""Checkpoints for real: SIGKILL mid-training and resume, corrupt/partial checkpoints, resharding
2 -> 1 ranks, SIGTERM preemption, and the non-finite loss/gradient policies."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from hydra import compose, initialize_config_dir

import gem.trainer
from gem.checkpoint import CheckpointError, verify
from gem.guards import NonFiniteError
from gem.trainer import Trainer
from tests.launch import device_overrides

ROOT = Path(__file__).resolve().parents[2]
TINY = ["data.batch_size=64", "data.eval_examples=1024", "data.seq.max_len=16", "trainer.progress=false",
        "trainer.tensorboard=false"]  # model: the default (dlrm) unless a test names one


def command(run_dir: Path, *overrides: str, nproc: int = 0) -> list[str]:
    launcher = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={nproc}"] if nproc \
        else [sys.executable]
    return [*launcher, str(ROOT / "train.py"), *TINY, *device_overrides(nproc, overrides), *overrides,
            f"hydra.run.dir={run_dir}"]


def run(run_dir: Path, *overrides: str, nproc: int = 0) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    result = subprocess.run(command(run_dir, *overrides, nproc=nproc), cwd=ROOT, env=env, capture_output=True,
                            text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    return result


def records(run_dir: Path, split: str) -> list[dict]:
    lines = (run_dir / "metrics.jsonl").read_text().splitlines()
    return [r for r in map(json.loads, lines) if r["split"] == split]


def final_metrics(run_dir: Path) -> dict:
    summary = records(run_dir, "summary")[-1]
    return {k: summary[k] for k in ("step", "loss", "ne", "auc", "calibration")}


def start_and_wait_for(run_dir: Path, checkpoint_step: int, *overrides: str, nproc: int = 0) -> subprocess.Popen:
    """Start a run in its own process group and return once `checkpoint_step` is saved."""
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen(command(run_dir, *overrides, nproc=nproc), cwd=ROOT, env=env, start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    target = run_dir / "checkpoints" / f"step_{checkpoint_step:08d}" / "MANIFEST.json"
    deadline = time.monotonic() + 300
    while not target.exists():
        assert proc.poll() is None, f"run ended before step {checkpoint_step}: {proc.stderr.read()[-3000:]}"
        assert time.monotonic() < deadline, "timed out waiting for the checkpoint"
        time.sleep(0.05)
    return proc


def alive(pid: int) -> bool:
    """The process exists and is not a zombie."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def descendants(pid: int) -> list[int]:
    """All processes below `pid` (torchrun starts its workers in sessions of their own, so a process
    group kill would miss them)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry.name))
    found, stack = [], [pid]
    while stack:
        for child in children.get(stack.pop(), []):
            found.append(child)
            stack.append(child)
    return found


LONG = ["trainer.max_steps=300", "trainer.eval_every=150", "trainer.log_every=50", "trainer.ckpt_every=50"]


@pytest.mark.slow
def test_sigkill_mid_training_then_resume_is_bitwise_exact(tmp_path: Path) -> None:
    run(tmp_path / "straight", *LONG, nproc=2)

    killed = tmp_path / "killed"
    proc = start_and_wait_for(killed, 100, *LONG, nproc=2)
    for pid in [proc.pid, *descendants(proc.pid)]:  # the torchrun agent and both workers, no clean-up
        os.kill(pid, signal.SIGKILL)
    proc.wait()
    steps_before = [r["step"] for r in records(killed, "train")]
    assert max(steps_before) < 300, "the run finished before it was killed: make it longer"

    run(killed, *LONG, nproc=2)  # trainer.resume=auto
    resume = records(killed, "resume")
    assert len(resume) == 1 and resume[0]["step"] >= 100
    # Training restarts right after the checkpoint: every step after it is trained once by the
    # resumed run, none before it again; the data stream is indexed by step.
    after = [r["step"] for r in (json.loads(x) for x in (killed / "metrics.jsonl").read_text().splitlines())
             if r["split"] == "train"][len(steps_before):]
    assert after == list(range(resume[0]["step"] + 50, 301, 50))
    assert final_metrics(killed) == final_metrics(tmp_path / "straight")  # bitwise: same floats in JSON


@pytest.mark.slow
def test_corrupt_and_partial_checkpoints_are_reported_and_skipped(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    run(run_dir, "trainer.max_steps=40", "trainer.eval_every=40", "trainer.ckpt_every=10", "trainer.keep_ckpts=3")
    checkpoints = run_dir / "checkpoints"
    assert sorted(p.name for p in checkpoints.iterdir()) == ["step_00000020", "step_00000030", "step_00000040"]
    straight = final_metrics(run_dir)

    # Newest: flip a byte in a shard. Next: a save that never finished (no manifest).
    shard = checkpoints / "step_00000040" / "__0_0.distcp"
    data = bytearray(shard.read_bytes())
    data[len(data) // 2] ^= 0xFF
    shard.write_bytes(bytes(data))
    (checkpoints / "step_00000030" / "MANIFEST.json").unlink()
    (checkpoints / "step_00000035.tmp").mkdir()  # a crash mid-save leaves this
    with pytest.raises(CheckpointError, match="CRC32"):
        verify(checkpoints / "step_00000040")

    run(run_dir, "trainer.max_steps=40", "trainer.eval_every=40", "trainer.ckpt_every=10", "trainer.keep_ckpts=3")
    skipped = [r["reason"] for r in records(run_dir, "checkpoint_skipped")]
    assert len(skipped) == 2 and "CRC32" in skipped[0] and "MANIFEST" in skipped[1]
    assert records(run_dir, "resume")[-1]["step"] == 20
    assert final_metrics(run_dir) == straight
    assert not list(checkpoints.glob("*.tmp"))


@pytest.mark.slow
@pytest.mark.parametrize("model", ["dlrm", "gem_tiny"])  # gem_tiny: a sharded EmbeddingCollection too
def test_two_rank_checkpoint_resumes_on_one_rank(tmp_path: Path, model: str) -> None:
    # On CPU throughout: the straight and the resharded run must share a device for 1e-5 to hold.
    steps = ["trainer.eval_every=40", "trainer.ckpt_every=20", "trainer.log_every=20", f"model={model}",
             "trainer.device=cpu"]
    run(tmp_path / "straight", "trainer.max_steps=40", *steps)  # 1 rank all the way
    resharded = tmp_path / "resharded"
    run(resharded, "trainer.max_steps=20", *steps, nproc=2)
    run(resharded, "trainer.max_steps=40", *steps)
    resume = records(resharded, "resume")[-1]
    assert (resume["checkpoint_world_size"], resume["world_size"], resume["step"]) == (2, 1, 20)
    a, b = final_metrics(tmp_path / "straight"), final_metrics(resharded)
    # 1 vs 2 ranks differ only in float summation order (see tests/test_train.py).
    for metric in ("ne", "auc", "calibration"):
        for task in a[metric]:
            assert b[metric][task] == pytest.approx(a[metric][task], rel=1e-5)


def test_resume_refuses_a_different_global_batch(tmp_path: Path) -> None:
    run(tmp_path, "trainer.max_steps=10", "trainer.ckpt_every=10", "trainer.eval_every=10")
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    result = subprocess.run(command(tmp_path, "trainer.max_steps=20", "data.batch_size=32"), cwd=ROOT, env=env,
                            capture_output=True, text=True, timeout=600)
    assert result.returncode != 0
    assert "data.batch_size=64" in result.stderr


def test_sigterm_checkpoints_and_exits_cleanly(tmp_path: Path) -> None:
    overrides = ["trainer.max_steps=100000", "trainer.eval_every=0", "trainer.ckpt_every=20"]
    proc = start_and_wait_for(tmp_path, 20, *overrides)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=120) == 0
    summary = records(tmp_path, "summary")[-1]
    assert summary["preempted"] is True and summary["step"] >= 20
    saved = tmp_path / "checkpoints" / f"step_{summary['step']:08d}"
    assert verify(saved)["position"]["step"] == summary["step"]


def test_sigterm_to_the_process_group_spares_the_data_workers(tmp_path: Path) -> None:
    """Schedulers (and `timeout`) signal the whole process group: the DataLoader workers get the
    SIGTERM too, and must not die of it before the trainer has written its preemption checkpoint."""
    overrides = ["trainer.max_steps=100000", "trainer.eval_every=0", "trainer.ckpt_every=20", "data.num_workers=2"]
    proc = start_and_wait_for(tmp_path, 20, *overrides)
    workers = descendants(proc.pid)
    assert len(workers) >= 2
    os.killpg(proc.pid, signal.SIGTERM)
    assert proc.wait(timeout=120) == 0, proc.stderr.read()[-3000:]
    summary = records(tmp_path, "summary")[-1]
    assert summary["preempted"] is True and summary["step"] >= 20
    assert verify(tmp_path / "checkpoints" / f"step_{summary['step']:08d}")["position"]["step"] == summary["step"]
    deadline = time.monotonic() + 30
    while any(alive(pid) for pid in workers):
        assert time.monotonic() < deadline, "data workers outlived the trainer"
        time.sleep(0.1)


@pytest.mark.slow
def test_sigterm_to_every_rank_under_torchrun(tmp_path: Path) -> None:
    """A scheduler's preemption notice reaches every worker: the ranks agree on the step to stop
    at, write one checkpoint together, and all exit 0 (so torchrun does too)."""
    overrides = ["trainer.max_steps=100000", "trainer.eval_every=0", "trainer.ckpt_every=20"]
    proc = start_and_wait_for(tmp_path, 20, *overrides, nproc=2)
    workers = [pid for pid in descendants(proc.pid) if "train.py" in Path(f"/proc/{pid}/cmdline").read_text()]
    assert len(workers) == 2
    for pid in workers:
        os.kill(pid, signal.SIGTERM)
    assert proc.wait(timeout=180) == 0
    summary = records(tmp_path, "summary")[-1]
    assert summary["preempted"] is True and summary["world_size"] == 2
    assert verify(tmp_path / "checkpoints" / f"step_{summary['step']:08d}")["world_size"] == 2


# ---------------------------------------------------------------- non-finite policies (in-process)


def make_trainer(tmp_path: Path, *overrides: str) -> Trainer:
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base=None):
        cfg = compose(config_name="config", overrides=[*TINY, "trainer.eval_every=0", "trainer.max_steps=8",
                                                       "trainer.log_every=2", *overrides])
    return Trainer(cfg, tmp_path)


def nan_loss_at(monkeypatch: pytest.MonkeyPatch, trainer: Trainer, bad_step: int) -> None:
    real = gem.trainer.weighted_bce

    def poisoned(logits, labels, weights):
        loss = real(logits, labels, weights)
        return loss * float("nan") if trainer.step + 1 == bad_step else loss

    monkeypatch.setattr(gem.trainer, "weighted_bce", poisoned)


def test_nonfinite_loss_stops_naming_the_step(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    trainer = make_trainer(tmp_path, "trainer.nonfinite=stop")
    nan_loss_at(monkeypatch, trainer, 5)
    with pytest.raises(NonFiniteError, match="at step 5"):
        trainer.train()
    trainer.close()


def test_nonfinite_loss_is_skipped_and_counted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    trainer = make_trainer(tmp_path, "trainer.nonfinite=skip")
    nan_loss_at(monkeypatch, trainer, 3)
    before = {n: p.detach().clone() for n, p in trainer.model.named_parameters() if "embedding" not in n}
    summary = trainer.train()
    trainer.close()
    assert summary["skipped_steps"] == 1 and summary["step"] == 8
    assert [r["step"] for r in records(tmp_path, "skipped")] == [3]
    assert all(torch.isfinite(p).all() for p in trainer.model.parameters())
    assert any(not torch.equal(before[n], p) for n, p in trainer.model.named_parameters() if n in before)
    assert all(v == v for v in summary["ne"].values())  # no NaN metrics


def test_nonfinite_gradient_is_skipped(tmp_path: Path) -> None:
    trainer = make_trainer(tmp_path, "trainer.nonfinite=skip")
    param = trainer.dense_params[0]
    handle = param.register_hook(lambda g: g * float("nan") if trainer.step + 1 == 4 else g)
    summary = trainer.train()
    handle.remove()
    trainer.close()
    assert summary["skipped_steps"] == 1
    assert torch.isfinite(param).all()


def test_too_many_skips_stop(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    trainer = make_trainer(tmp_path, "trainer.nonfinite=skip", "trainer.max_skipped_steps=2")
    real = gem.trainer.weighted_bce
    monkeypatch.setattr(gem.trainer, "weighted_bce", lambda *a: real(*a) * float("nan"))
    with pytest.raises(NonFiniteError, match="3 steps skipped"):
        trainer.train()
    trainer.close()
