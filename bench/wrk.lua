-- wrk script for scripts/bench.sh: POST a 64-byte body as application/octet-stream.
--
-- BENCH_TARGET_CONTAINER (environment), when set, adds the SageMaker header
-- X-Amzn-SageMaker-Target-Container-Hostname (Direct endpoints through mce).
--
-- done() prints one machine-readable line that bench.sh parses:
--   BENCH requests=N duration_us=N p50_us=N p99_us=N status=N connect=N read=N write=N timeout=N
-- status is wrk's "Non-2xx or 3xx responses" counter (answers with status > 399);
-- connect/read/write/timeout are its socket errors.
wrk.method = "POST"
wrk.body = string.rep("0123456789abcdef", 4) -- 64 bytes
wrk.headers["Content-Type"] = "application/octet-stream"

local target = os.getenv("BENCH_TARGET_CONTAINER")
if target ~= nil and target ~= "" then
  wrk.headers["X-Amzn-SageMaker-Target-Container-Hostname"] = target
end

function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    "BENCH requests=%d duration_us=%d p50_us=%d p99_us=%d status=%d connect=%d read=%d write=%d timeout=%d\n",
    summary.requests, summary.duration, latency:percentile(50), latency:percentile(99),
    e.status, e.connect, e.read, e.write, e.timeout))
end
