"""``iron-lm serve``: one model behind OpenAI's HTTP API.

``command`` holds the subcommand (``add_parser``, ``run``); ``app`` the
Starlette app (``create_app``); ``protocol`` the request checks and response
objects; ``logprobs`` the log-probabilities a request may ask for;
``worker`` the device's single thread and its bounded queue.
Starlette and uvicorn (the ``serve`` extra) load only with ``app``.
"""
