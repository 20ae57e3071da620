#!/usr/bin/env bash
# cassandra.sh — a real Apache Cassandra for tests, benchmarks and the demo, without Docker.
#
# Cassandra is published on Maven Central as org.apache.cassandra:cassandra-all; a node runs
# from that jar plus its runtime dependencies on Debian's OpenJDK 17 (Cassandra 5.0 supports
# Java 11 and 17; its security manager fails on JDK 24+).
#
# Usage:
#   e2e/cassandra.sh fetch            download the jars (once; later calls reuse them)
#   e2e/cassandra.sh start [N]        start N nodes (default 1) on 127.0.0.1..127.0.0.N:9042
#   e2e/cassandra.sh stop [N...|all]  stop nodes N... (1-based), or every node (default)
#   e2e/cassandra.sh startnode N...   start nodes of an existing cluster again (after stop)
#   e2e/cassandra.sh status           which nodes run
#   e2e/cassandra.sh wipe             stop everything and delete data and logs
#
# Environment:
#   CASSANDRA_VERSION   default 5.0.8
#   CASSFS_CACHE        where jars are kept (default ~/.cache/cassfs)
#   CASSFS_CASSANDRA_DIR  data, logs and configs (default .cassandra in the repository root)
#   CASSANDRA_HEAP      heap per node (default 512M for clusters, 2G for one node)
#   CASSFS_CASSANDRA_IP_BASE  node N listens on 127.0.0.(BASE+N) (default 0), so that a second
#                       cluster (with its own CASSFS_CASSANDRA_DIR) can run beside the first
#   CASSFS_CASSANDRA_SECURE=1  clients must use TLS with a client certificate (mutual TLS) and
#                       log in (PasswordAuthenticator; the default superuser is
#                       cassandra/cassandra). A CA, the nodes' certificate and a client
#                       certificate are made in $CASSFS_CASSANDRA_DIR/tls on first start:
#                       ca.pem, client.pem, client.key for clients.
#   CASSFS_CASSANDRA_AUTHZ=1  with SECURE: roles get only the permissions granted them
#                       (CassandraAuthorizer; default AllowAllAuthorizer: any login may do anything)
set -euo pipefail

VERSION=${CASSANDRA_VERSION:-5.0.8}
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
CACHE=${CASSFS_CACHE:-$HOME/.cache/cassfs}
LIB=$CACHE/cassandra-$VERSION/lib
RUN=${CASSFS_CASSANDRA_DIR:-$ROOT/.cassandra}
CLUSTER_NAME=cassfs-test

log() { printf 'cassandra.sh: %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }

find_java17() {
  for j in "${JAVA17_HOME:-}" /usr/lib/jvm/java-17-openjdk-amd64 /usr/lib/jvm/java-17-openjdk-arm64 /usr/lib/jvm/java-17-openjdk; do
    [ -n "$j" ] && [ -x "$j/bin/java" ] && { echo "$j/bin/java"; return; }
  done
  if command -v java >/dev/null && java -version 2>&1 | grep -q 'version "17'; then
    command -v java; return
  fi
  return 1
}

ensure_tools() {
  local missing=()
  find_java17 >/dev/null || missing+=(openjdk-17-jre-headless)
  command -v mvn >/dev/null || missing+=(maven)
  if [ ${#missing[@]} -gt 0 ]; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
      log "installing ${missing[*]}"
      apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
    else
      die "need ${missing[*]}: install them (Debian: apt-get install ${missing[*]})"
    fi
  fi
}

fetch() {
  if [ -f "$LIB/.complete" ]; then return; fi
  ensure_tools
  log "downloading Cassandra $VERSION and its dependencies from Maven Central into $LIB"
  local tmp; tmp=$(mktemp -d)
  cat >"$tmp/pom.xml" <<EOF
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>cassfs</groupId><artifactId>cassandra-runtime</artifactId><version>1</version>
  <dependencies>
    <dependency>
      <groupId>org.apache.cassandra</groupId><artifactId>cassandra-all</artifactId>
      <version>$VERSION</version>
    </dependency>
  </dependencies>
</project>
EOF
  mkdir -p "$LIB"
  (cd "$tmp" && mvn -B -q -Dstyle.color=never dependency:copy-dependencies -DincludeScope=runtime -DoutputDirectory="$LIB") \
    || die "maven could not fetch cassandra-all:$VERSION (is Maven Central reachable?)"
  ls "$LIB"/cassandra-all-*.jar >/dev/null 2>&1 || die "cassandra-all jar missing in $LIB"
  rm -rf "$tmp"
  touch "$LIB/.complete"
}

node_dir() { echo "$RUN/node$1"; }
IP_BASE=${CASSFS_CASSANDRA_IP_BASE:-0}
node_ip() { echo "127.0.0.$((IP_BASE + $1))"; }

token_for() { # node index, node count
  python3 - "$1" "$2" <<'EOF'
import sys
i, n = int(sys.argv[1]), int(sys.argv[2])
print(-(2**63) + (i - 1) * (2**64 // n))
EOF
}

SECURE=${CASSFS_CASSANDRA_SECURE:-}
AUTHORIZER=AllowAllAuthorizer
[ -z "${CASSFS_CASSANDRA_AUTHZ:-}" ] || AUTHORIZER=CassandraAuthorizer
TLS=$RUN/tls
STOREPASS=cassfs-test

# make_certs makes a CA, one certificate for every node address (IP SANs) in a PKCS12
# keystore, a truststore holding the CA (client certificates are checked against it), and
# a client certificate.
make_certs() { # node count
  local n=$1 sans="" i
  [ -f "$TLS/keystore.p12" ] && return
  command -v openssl >/dev/null || die "need openssl for CASSFS_CASSANDRA_SECURE (apt-get install openssl)"
  mkdir -p "$TLS"
  for i in $(seq 1 "$n"); do sans="${sans:+$sans,}IP:$(node_ip "$i")"; done
  (
    cd "$TLS"
    openssl req -x509 -newkey rsa:2048 -nodes -days 30 -subj "/CN=cassfs test CA" -keyout ca.key -out ca.pem 2>/dev/null
    openssl req -newkey rsa:2048 -nodes -subj "/CN=cassandra" -keyout node.key -out node.csr 2>/dev/null
    printf 'subjectAltName=%s\nextendedKeyUsage=serverAuth,clientAuth\n' "$sans" >node.ext
    openssl x509 -req -in node.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 30 -extfile node.ext -out node.pem 2>/dev/null
    openssl pkcs12 -export -in node.pem -inkey node.key -certfile ca.pem -name node -passout pass:$STOREPASS -out keystore.p12
    "$(dirname "$(find_java17)")/keytool" -importcert -noprompt -alias ca -file ca.pem -storetype PKCS12 \
      -keystore truststore.p12 -storepass $STOREPASS >/dev/null 2>&1
    openssl req -newkey rsa:2048 -nodes -subj "/CN=cassfs client" -keyout client.key -out client.csr 2>/dev/null
    printf 'extendedKeyUsage=clientAuth\n' >client.ext
    openssl x509 -req -in client.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 30 -extfile client.ext -out client.pem 2>/dev/null
  ) || die "making test certificates in $TLS failed"
}

security_config() {
  if [ -z "$SECURE" ]; then
    printf 'authenticator: AllowAllAuthenticator\nauthorizer: AllowAllAuthorizer\n'
    return
  fi
  cat <<EOF
authenticator: PasswordAuthenticator
authorizer: $AUTHORIZER
client_encryption_options:
  enabled: true
  optional: false
  keystore: $TLS/keystore.p12
  keystore_password: $STOREPASS
  truststore: $TLS/truststore.p12
  truststore_password: $STOREPASS
  store_type: PKCS12
  require_client_auth: true
EOF
}

write_config() { # node index, node count
  local i=$1 n=$2 d; d=$(node_dir "$i")
  mkdir -p "$d"/{data,commitlog,saved_caches,hints,cdc_raw,logs}
  cat >"$d/cassandra.yaml" <<EOF
cluster_name: $CLUSTER_NAME
num_tokens: 1
initial_token: $(token_for "$i" "$n")
auto_bootstrap: false
partitioner: org.apache.cassandra.dht.Murmur3Partitioner
endpoint_snitch: SimpleSnitch
listen_address: $(node_ip "$i")
rpc_address: $(node_ip "$i")
native_transport_port: 9042
storage_port: 7000
seed_provider:
  - class_name: org.apache.cassandra.locator.SimpleSeedProvider
    parameters:
      - seeds: "$(node_ip 1)"
data_file_directories:
  - $d/data
commitlog_directory: $d/commitlog
saved_caches_directory: $d/saved_caches
hints_directory: $d/hints
cdc_raw_directory: $d/cdc_raw
commitlog_sync: periodic
commitlog_sync_period: 10000ms
auto_snapshot: false
cdc_enabled: false
start_native_transport: true
$(security_config)
concurrent_reads: 32
concurrent_writes: 32
native_transport_max_frame_size: 16MiB
read_request_timeout: 5000ms
write_request_timeout: 5000ms
EOF
  cat >"$d/logback.xml" <<EOF
<configuration scan="false">
  <appender name="FILE" class="ch.qos.logback.core.FileAppender">
    <file>$d/logs/system.log</file>
    <encoder><pattern>%-5level [%thread] %date{ISO8601} %F:%L - %msg%n</pattern></encoder>
  </appender>
  <root level="INFO"><appender-ref ref="FILE"/></root>
  <logger name="org.apache.cassandra.utils.SigarLibrary" level="ERROR"/>
</configuration>
EOF
}

pid_of() { local f; f="$(node_dir "$1")/pid"; [ -f "$f" ] && kill -0 "$(cat "$f")" 2>/dev/null && cat "$f"; }

# ports_free checks, before a node starts, that nothing else listens on its CQL, storage and
# JMX ports: a node started there fails deep in its startup with a Java stack trace.
ports_free() { # node index
  local i=$1 ip port who
  ip=$(node_ip "$i")
  for port in "$ip:9042" "$ip:7000" "127.0.0.1:$((7198 + IP_BASE + i))"; do
    if (exec 3<>"/dev/tcp/${port%:*}/${port##*:}") 2>/dev/null; then
      who=$(ss -Htlnp "sport = :${port##*:}" 2>/dev/null | grep -o 'users:(([^)]*))' | head -n 1 || true)
      die "$port is already in use${who:+ by $who}: is another Cassandra running there?
  stop it, or use it for the tests (CASSFS_TEST_HOSTS=$ip:9042 make e2e),
  or start this one beside it on other addresses (CASSFS_CASSANDRA_IP_BASE=10 gives 127.0.0.11...;
  with a CASSFS_CASSANDRA_DIR of its own)"
    fi
  done
}

launch() { # node index
  local i=$1 d java jamm heap; d=$(node_dir "$i")
  java=$(find_java17) || die "no Java 17 found (Cassandra 5.0 needs Java 11 or 17)"
  jamm=$(ls "$LIB"/jamm-*.jar | head -n 1)
  heap=${CASSANDRA_HEAP:-$( [ "$(cat "$RUN/nodes")" = 1 ] && echo 2G || echo 512M )}
  # wait_ready looks for the ready line: start every run with fresh logs.
  [ -f "$d/logs/system.log" ] && mv -f "$d/logs/system.log" "$d/logs/system.log.1"
  : >"$d/logs/stdout.log"
  # The --add-exports/--add-opens list is Cassandra's conf/jvm17-server.options plus what an
  # embedded start needs; without it Cassandra fails on module access at startup.
  setsid "$java" -Xms"$heap" -Xmx"$heap" -Xss512k -XX:+UseG1GC -XX:+ExitOnOutOfMemoryError \
    -javaagent:"$jamm" \
    -Djdk.attach.allowAttachSelf=true \
    --add-exports java.base/jdk.internal.misc=ALL-UNNAMED \
    --add-exports java.base/jdk.internal.ref=ALL-UNNAMED \
    --add-exports java.base/sun.nio.ch=ALL-UNNAMED \
    --add-exports java.management.rmi/com.sun.jmx.remote.internal.rmi=ALL-UNNAMED \
    --add-exports java.management/com.sun.jmx.remote.security=ALL-UNNAMED \
    --add-exports java.rmi/sun.rmi.registry=ALL-UNNAMED \
    --add-exports java.rmi/sun.rmi.server=ALL-UNNAMED \
    --add-exports java.sql/java.sql=ALL-UNNAMED \
    --add-exports jdk.attach/sun.tools.attach=ALL-UNNAMED \
    --add-opens java.base/java.lang.module=ALL-UNNAMED \
    --add-opens java.base/jdk.internal.loader=ALL-UNNAMED \
    --add-opens java.base/jdk.internal.ref=ALL-UNNAMED \
    --add-opens java.base/jdk.internal.reflect=ALL-UNNAMED \
    --add-opens java.base/jdk.internal.math=ALL-UNNAMED \
    --add-opens java.base/jdk.internal.module=ALL-UNNAMED \
    --add-opens java.base/jdk.internal.util.jar=ALL-UNNAMED \
    --add-opens jdk.management/com.sun.management.internal=ALL-UNNAMED \
    --add-opens java.base/sun.nio.ch=ALL-UNNAMED \
    --add-opens java.base/java.io=ALL-UNNAMED \
    --add-opens java.base/java.nio=ALL-UNNAMED \
    --add-opens java.base/java.util.concurrent=ALL-UNNAMED \
    --add-opens java.base/java.util=ALL-UNNAMED \
    --add-opens java.base/java.util.concurrent.atomic=ALL-UNNAMED \
    --add-opens java.base/java.lang=ALL-UNNAMED \
    --add-opens java.base/java.math=ALL-UNNAMED \
    --add-opens java.base/java.lang.reflect=ALL-UNNAMED \
    --add-opens java.base/java.net=ALL-UNNAMED \
    -Dio.netty.tryReflectionSetAccessible=true \
    -Djava.net.preferIPv4Stack=true \
    -Dcassandra.config="file://$d/cassandra.yaml" \
    -Dcassandra.storagedir="$d" \
    -Dcassandra.logdir="$d/logs" \
    -Dlogback.configurationFile="$d/logback.xml" \
    -Dcassandra-foreground=yes \
    -Dcassandra.jmx.local.port=$((7198 + IP_BASE + i)) \
    -Dcassandra.skip_wait_for_gossip_to_settle=0 \
    -Dcassandra.ring_delay_ms=1000 \
    -Dcassandra.skip_sync=true \
    -Dcassandra.superuser_setup_delay_ms=0 \
    -cp "$LIB/*" org.apache.cassandra.service.CassandraDaemon \
    >"$d/logs/stdout.log" 2>&1 </dev/null &
  echo $! >"$d/pid"
}

wait_ready() { # node index
  local i=$1 d deadline pid; d=$(node_dir "$i")
  deadline=$(( $(date +%s) + ${CASSANDRA_START_TIMEOUT:-180} ))
  while :; do
    if grep -q "Starting listening for CQL clients" "$d/logs/system.log" 2>/dev/null; then
      log "node $i ready on $(node_ip "$i"):9042"; return
    fi
    pid=$(pid_of "$i") || { tail -n 30 "$d/logs/stdout.log" "$d/logs/system.log" >&2 2>/dev/null; die "node $i exited during startup (logs in $d/logs)"; }
    [ "$(date +%s)" -lt "$deadline" ] || { tail -n 30 "$d/logs/system.log" >&2 2>/dev/null; die "node $i not ready after ${CASSANDRA_START_TIMEOUT:-180}s (logs in $d/logs)"; }
    sleep 1
  done
}

start() {
  local n=${1:-1} i
  case "$n" in [1-9]) ;; *) die "node count must be 1..9, got '$n'" ;; esac
  fetch
  mkdir -p "$RUN"
  if [ -f "$RUN/nodes" ] && [ "$(cat "$RUN/nodes")" != "$n" ]; then
    log "existing data is for $(cat "$RUN/nodes") node(s); wiping it for a $n-node cluster"
    wipe
    mkdir -p "$RUN"
  fi
  echo "$n" >"$RUN/nodes"
  [ -z "$SECURE" ] || make_certs "$n"
  for i in $(seq 1 "$n"); do
    if pid_of "$i" >/dev/null; then log "node $i already running"; continue; fi
    ports_free "$i"
    write_config "$i" "$n"
    log "starting node $i on $(node_ip "$i")"
    launch "$i"
    wait_ready "$i"
  done
}

startnode() { # node numbers, started one after another (started together, a node can
  # exit during startup while its peers' gossip state is still empty)
  [ $# -gt 0 ] || die "startnode needs node numbers"
  [ -f "$RUN/nodes" ] || die "no cluster: run start first"
  local i
  for i in "$@"; do
    if pid_of "$i" >/dev/null; then log "node $i already running"; continue; fi
    ports_free "$i"
    launch "$i"
    wait_ready "$i"
  done
}

stop_nodes() { # node numbers: signalled together, then waited for
  local i pid d pids=()
  for i in "$@"; do
    d=$(node_dir "$i")
    pid=$(pid_of "$i") || { rm -f "$d/pid"; continue; }
    log "stopping node $i (pid $pid)"
    kill -TERM "$pid" 2>/dev/null || true
    pids+=("$i:$pid")
  done
  for p in "${pids[@]}"; do
    i=${p%%:*} pid=${p##*:}
    for _ in $(seq 1 60); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
    if kill -0 "$pid" 2>/dev/null; then log "node $i did not stop in 30s; killing"; kill -KILL "$pid" 2>/dev/null || true; fi
    rm -f "$(node_dir "$i")/pid"
  done
}

stop() {
  local what=${1:-all} nodes=() d
  if [ "$what" = all ]; then
    for d in "$RUN"/node*; do [ -d "$d" ] && nodes+=("${d##*node}"); done
  else
    nodes=("$@")
  fi
  [ ${#nodes[@]} -eq 0 ] || stop_nodes "${nodes[@]}"
  return 0
}

status() {
  local any=1
  for d in "$RUN"/node*; do
    [ -d "$d" ] || continue
    i=${d##*node}
    if pid=$(pid_of "$i"); then echo "node $i: running (pid $pid) on $(node_ip "$i"):9042"; any=0
    else echo "node $i: stopped"; fi
  done
  return $any
}

wipe() { stop all; rm -rf "$RUN"; }

cmd=${1:-}
shift || true
case "$cmd" in
  fetch) fetch ;;
  start) start "$@" ;;
  startnode) startnode "$@" ;;
  stop) stop "$@" ;;
  status) status ;;
  wipe) wipe ;;
  *) sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;;
esac
