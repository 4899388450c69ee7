"""kgbench: Hydra sweeps over KataGo serving configurations, measured through kgserve, tracked in MLflow.

`python -m kgbench -m backend=cuda,trt nnMaxBatchSize=64,128,256` (see conf/config.yaml).
"""

__all__: list[str] = []
