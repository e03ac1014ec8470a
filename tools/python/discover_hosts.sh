#!/bin/sh
# Host discovery script for `horovodrun --host-discovery-script`.
# horovodrun runs it about once a second (through /bin/sh, with the launcher's
# environment) and reads "host:slots" lines from stdout. It prints the file
# named by $SMOKE_HOSTS_FILE, or "localhost:2" when that variable is unset, so
# a test can rescale a running job by rewriting the file.
if [ -n "${SMOKE_HOSTS_FILE:-}" ]; then
  exec cat "$SMOKE_HOSTS_FILE"
fi
echo "localhost:2"
