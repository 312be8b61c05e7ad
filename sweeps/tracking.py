"""What a trial logs while it trains, besides its row in DIR/results: TensorBoard scalars (always), and an MLflow
or Weights & Biases run where the spec's `tracking:` turns one on.

    DIR/tensorboard/<trial_id>/events.out.tfevents.*     tensorboard --logdir DIR/tensorboard

Scalars, x = steps done (1 … steps):
    train/loss, train/lr        every logged step (absolute LR: the spec's lr × the schedule's factor)
    train/grad_norm             every step, before clipping (absent without clipping)
    val/loss                    at each horizon (eval.horizons); the last one is the trial's val_loss

MLflow and W&B get the same series (names with "/" → "_" for MLflow) plus the trial's coordinates as parameters
and its final record's losses. mlflow and wandb are imported only when the spec asks for them (optional packages).
"""
from __future__ import annotations

import math
import os
import shutil
import time
from pathlib import Path
from typing import Any

from tensorboardX import SummaryWriter  # ships with Ray Tune

DEFAULT_MLFLOW_DB = "mlflow.db"  # sqlite:///DIR/mlflow.db when the spec gives no tracking_uri
FINAL_KEYS = ("val_loss", "smoothed_loss", "final_train_loss")
MLFLOW_STATUS = {"ok": "FINISHED", "diverged": "FINISHED", "pruned": "KILLED", "stopped": "KILLED"}  # else FAILED


def tensorboard_dir(out: Path, trial_id: str) -> Path:
    return Path(out) / "tensorboard" / trial_id


def mlflow_uri(settings: dict[str, str], out: Path) -> str:
    """The spec's tracking_uri, else MLFLOW_TRACKING_URI, else a sqlite file in the sweep directory."""
    return settings.get("tracking_uri") or os.environ.get("MLFLOW_TRACKING_URI") or \
        f"sqlite:///{(Path(out) / DEFAULT_MLFLOW_DB).resolve()}"


def mlflow_experiment(settings: dict[str, str], out: Path, sweep: str) -> tuple[Any, str]:
    """(MLflow client, id of the sweep's experiment), creating the experiment where it does not exist. The driver
    calls it once before any trial starts, so trials do not race to create the store's tables or the experiment."""
    from mlflow.tracking import MlflowClient  # optional package

    client = MlflowClient(tracking_uri=mlflow_uri(settings, out))
    name = settings.get("experiment", sweep)
    found = client.get_experiment_by_name(name)
    return client, found.experiment_id if found is not None else client.create_experiment(name)


class Tracker:
    """One trial's logs. `cfg` is the trial config (sweeps.trial.trial_config); a rerun of an unfinished trial
    starts its TensorBoard folder afresh."""

    def __init__(self, cfg: dict[str, Any]) -> None:
        folder = tensorboard_dir(Path(cfg["out"]), cfg["trial_id"])
        shutil.rmtree(folder, ignore_errors=True)
        self.writer = SummaryWriter(str(folder), flush_secs=10)
        self.lr, self.norms_written = cfg["point"]["lr"], 0
        tracking, params = cfg["tracking"], {**cfg["point"], "phase": cfg["phase"], "steps": cfg["train"]["steps"]}
        self.mlflow = self.wandb = None
        if tracking.get("mlflow") is not None:
            from mlflow.entities import Param  # optional package

            self.mlflow, experiment = mlflow_experiment(tracking["mlflow"], Path(cfg["out"]), cfg["sweep"])
            run = self.mlflow.create_run(experiment, run_name=cfg["trial_id"],
                                         tags={"trial_id": cfg["trial_id"], "sweep": cfg["sweep"]})
            self.mlflow_run = run.info.run_id
            self.mlflow.log_batch(self.mlflow_run, params=[Param(k, str(v)) for k, v in params.items()])
        if tracking.get("wandb") is not None:
            import wandb  # optional package

            settings = tracking["wandb"]
            self.wandb = wandb.init(project=settings["project"], entity=settings.get("entity"),
                                    mode=settings.get("mode", "online"), name=cfg["trial_id"], group=cfg["sweep"],
                                    config=params, dir=str(Path(cfg["out"])), reinit="finish_previous")

    def scalars(self, values: dict[str, float], step: int) -> None:
        """Logs {name: value} at `step` (steps done) everywhere; non-finite values are left out."""
        values = {k: v for k, v in values.items() if v is not None and math.isfinite(v)}
        if not values:
            return
        for name, value in values.items():
            self.writer.add_scalar(name, value, step)
        if self.mlflow is not None:
            from mlflow.entities import Metric  # optional package

            stamp = int(time.time() * 1000)
            self.mlflow.log_batch(self.mlflow_run, metrics=[Metric(k.replace("/", "_"), v, stamp, step)
                                                            for k, v in values.items()])
        if self.wandb is not None:
            self.wandb.log(values, step=step)

    def train_rows(self, rows: list[tuple[int, float, float]]) -> None:
        """Rows as the training loop hands them to on_log: (step index, train loss, LR factor)."""
        for step, loss, factor in rows:
            self.scalars({"train/loss": loss, "train/lr": self.lr * factor}, step + 1)

    def grad_norms(self, norms: list[float]) -> None:
        """The per-step gradient norms recorded so far (only the ones not yet logged are written)."""
        for index in range(self.norms_written, len(norms)):
            self.scalars({"train/grad_norm": norms[index]}, index + 1)
        self.norms_written = len(norms)

    def horizon(self, step: int, val_loss: float) -> None:
        self.scalars({"val/loss": val_loss}, step)
        self.writer.flush()  # before the trial reports it (a pruned trial does not come back from that report)

    def close(self, record: dict[str, Any] | None = None) -> None:
        """Ends every log; `record` (the trial's row) adds its final losses and status where there is one."""
        self.writer.close()
        status = (record or {}).get("status", "error")
        final = {k: record[k] for k in FINAL_KEYS if record and isinstance(record.get(k), float)
                 and math.isfinite(record[k])}
        if self.mlflow is not None:
            from mlflow.entities import Metric  # optional package

            stamp, steps = int(time.time() * 1000), (record or {}).get("steps", 0)
            self.mlflow.log_batch(self.mlflow_run, metrics=[Metric(k, v, stamp, steps) for k, v in final.items()])
            self.mlflow.set_tag(self.mlflow_run, "status", status)
            self.mlflow.set_terminated(self.mlflow_run, MLFLOW_STATUS.get(status, "FAILED"))
        if self.wandb is not None:
            self.wandb.summary.update({**final, "status": status})
            self.wandb.finish(exit_code=0 if status in ("ok", "diverged", "pruned", "stopped") else 1)
