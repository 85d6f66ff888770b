-- post.lua - every wrk request is a POST of a 1 MiB body (bench/proxy.sh's upload row), plus
-- result.lua's RESULT line. The body is built once; wrk keeps its pre-built request.
wrk.method = "POST"
wrk.body = string.rep("0123456789abcdef", 65536)
wrk.headers["Content-Type"] = "application/octet-stream"
local here = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
dofile(here .. "result.lua")
