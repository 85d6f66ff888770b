-- specweb.lua - the SPECweb96 request mix for wrk, over the file set bench/setup.sh makes:
--   wrk ... -s bench/wrk/specweb.lua http://HOST:PORT/ -- DIRECTORIES [SEED]
-- A request picks a class by SPECweb96's frequencies (class 0, 0.1-0.9 KB: 35%; class 1,
-- 1-9 KB: 50%; class 2, 10-90 KB: 14%; class 3, 100-900 KB: 1%), then a directory and one of
-- the class's nine files uniformly. The seed is fixed, so every server gets the same sequence.
local paths = {}

init = function(args)
  local directories = tonumber(args[1]) or 10
  math.randomseed(tonumber(args[2]) or 1996)
  for class = 0, 3 do
    paths[class] = {}
    for directory = 0, directories - 1 do
      for file = 0, 8 do
        local path = string.format("/specweb/dir%05d/class%d_%d", directory, class, file)
        paths[class][#paths[class] + 1] = wrk.format("GET", path)
      end
    end
  end
end

request = function()
  local draw = math.random(100)
  local class = 3
  if draw <= 35 then class = 0 elseif draw <= 85 then class = 1 elseif draw <= 99 then class = 2 end
  local choices = paths[class]
  return choices[math.random(#choices)]
end

-- The same summary line as result.lua.
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format("RESULT requests=%d duration_us=%d bytes=%d errors=%d p50_us=%.0f p99_us=%.0f\n",
    summary.requests, summary.duration, summary.bytes,
    e.connect + e.read + e.write + e.status + e.timeout,
    latency:percentile(50), latency:percentile(99)))
end
