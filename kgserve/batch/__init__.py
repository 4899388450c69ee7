"""`python -m kgserve.batch`: the bulk analysis job, resumable (docs/batch.md).

inputs (SGF records or JSONL queries -> rows) -> run (rows to a target, `concurrency` at a time; journal) ->
journal (answers on disk as they arrive; OUT in input order at the end) -> summary. Targets: a kgserve URL
(target_http) or the runtime's engine pool in this process (target_pool). Entry point: cli.
"""
