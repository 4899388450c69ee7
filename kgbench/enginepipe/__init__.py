"""The engine measured over its own stdin pipe, without kgserve: `engineload` (closed-loop load into one analysis
engine process) and `policyload` (bulk policy load: the engine alone, then behind kgserve, then kgserve's own
ceiling). What a node's figures are held against: `python -m kgbench.enginepipe.policyload --bin KATAGO ...`."""
