"""Training: data sources that need no download, optimizers, schedules, the loop with precision
policies, metrics and checkpoints."""

from .checkpoint import CheckpointError
from .config import DATA, OPTIMIZERS, TrainConfig, default_model
from .data import AlgorithmicSource, DataSource, MarkovSource, TextSource
from .ensemble import Ensemble, train_ensemble
from .optim import SGD, AdamW, clip_grad_norm
from .precision import PRECISIONS, TrainingPrecision
from .schedules import SCHEDULES, learning_rate
from .trainer import Trainer, TrainResult, make_source, train

__all__ = [
    "DATA",
    "OPTIMIZERS",
    "PRECISIONS",
    "SCHEDULES",
    "SGD",
    "AdamW",
    "AlgorithmicSource",
    "CheckpointError",
    "DataSource",
    "Ensemble",
    "MarkovSource",
    "TextSource",
    "TrainConfig",
    "TrainResult",
    "Trainer",
    "TrainingPrecision",
    "clip_grad_norm",
    "default_model",
    "learning_rate",
    "make_source",
    "train",
    "train_ensemble",
]
