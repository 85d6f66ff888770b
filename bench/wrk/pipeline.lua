-- pipeline.lua - HTTP/1.1 pipelining for wrk: each write carries DEPTH requests for the URL's
-- path, so the per-request cost of the load generator is shared by DEPTH responses and the
-- server's own cost shows. wrk counts every response.
--   wrk ... -s bench/wrk/pipeline.lua http://HOST:PORT/PATH -- [DEPTH, default 16]
local batch

init = function(args)
  local depth = tonumber(args[1]) or 16
  local one = wrk.format()
  batch = string.rep(one, depth)
end

request = function()
  return batch
end
