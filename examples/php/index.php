<?php
// The front controller of examples/php-fpm.toml: every URL without a file of its own comes
// here, with the client's REQUEST_URI.
header('Content-Type: text/plain; charset=utf-8');
echo "Hello from PHP ", PHP_VERSION, "\n";
foreach (['REQUEST_URI', 'SCRIPT_NAME', 'PATH_INFO', 'QUERY_STRING', 'APP_ENV'] as $name) {
    printf("%-12s %s\n", $name, $_SERVER[$name] ?? '(unset)');
}
