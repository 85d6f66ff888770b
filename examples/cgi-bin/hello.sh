#!/bin/sh
# The script of examples/cgi.toml: a CGI response is header lines, a blank line, the body.
printf 'Content-Type: text/plain; charset=utf-8\n\n'
printf 'Hello from CGI\n'
printf 'SCRIPT_NAME=%s\nPATH_INFO=%s\nQUERY_STRING=%s\nSITE_NAME=%s\n' \
    "$SCRIPT_NAME" "$PATH_INFO" "$QUERY_STRING" "$SITE_NAME"
