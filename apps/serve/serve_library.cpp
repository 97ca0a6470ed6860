// ember_serve: the OpenAI-compatible HTTP server (`ember serve`) and its load
// generator (`ember bench-serve`), the only users of cpp-httplib.
