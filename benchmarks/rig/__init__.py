"""The rig of the hot-path benchmarks (benchmarks.hotpath, benchmarks.workers_scaling): the servers they load
(`servers`: kgserve and the bare Starlette-on-uvicorn stack, `bare_asgi`; `standin_engine`, canned KataGo answers
at nearly no CPU) and the closed-loop client (`client`)."""
