-- result.lua - adds one machine-readable line to wrk's report, for bench/peers.sh:
--   RESULT requests=N duration_us=N bytes=N errors=N p50_us=N p99_us=N
-- It defines no request() or response() hook, so wrk keeps its fast path (one pre-built request).
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format("RESULT requests=%d duration_us=%d bytes=%d errors=%d p50_us=%.0f p99_us=%.0f\n",
    summary.requests, summary.duration, summary.bytes,
    e.connect + e.read + e.write + e.status + e.timeout,
    latency:percentile(50), latency:percentile(99)))
end
