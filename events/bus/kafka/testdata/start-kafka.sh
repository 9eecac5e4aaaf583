#!/usr/bin/env bash
# Starts a single-node Apache Kafka (KRaft mode: one process is broker and
# controller) on 127.0.0.1 for the kafka adapter's conformance test, and
# returns once the broker has started. It listens on 9092 (the controller on
# the port after it) or, when that pair is taken, on the first free pair
# above it, so another broker on the machine does not stop the tests. Its only output on stdout is the
# broker address (progress and errors go to stderr), so:
#
#   export KAFKA_BROKERS=$(events/bus/kafka/testdata/start-kafka.sh)
#   go test ./events/bus/kafka
#   events/bus/kafka/testdata/start-kafka.sh stop
#
# The jars (org.apache.kafka:kafka_2.13 and its runtime dependencies) come
# from Maven Central through mvn and are cached in $KAFKA_WORK/lib; it needs
# Java 17+ and Maven. Data lives in $KAFKA_WORK/data and is wiped on each
# start. Environment: KAFKA_VERSION (default 4.1.1), KAFKA_WORK (default
# /tmp/citizen-kafka), KAFKA_READY_TIMEOUT seconds (default 180), KAFKA_PORT
# (the broker's port; set, it is used or the start fails).
set -euo pipefail

VERSION=${KAFKA_VERSION:-4.1.1}
WORK=${KAFKA_WORK:-/tmp/citizen-kafka}
TIMEOUT=${KAFKA_READY_TIMEOUT:-180}
LIB=$WORK/lib-$VERSION
mkdir -p "$WORK"

port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
running() { [ -f "$WORK/kafka.pid" ] && kill -0 "$(cat "$WORK/kafka.pid")" 2>/dev/null; }

if [ "${1:-}" = "stop" ]; then
	if running; then
		pid=$(cat "$WORK/kafka.pid")
		kill "$pid"
		for ((i = 0; i < 60; i++)); do
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.5
		done
		kill -0 "$pid" 2>/dev/null && kill -9 "$pid"
		echo "start-kafka: stopped kafka (pid $pid)" >&2
	fi
	rm -f "$WORK/kafka.pid" "$WORK/kafka.port"
	exit 0
fi

if running && [ -f "$WORK/kafka.port" ] && port_open "$(cat "$WORK/kafka.port")"; then
	echo "start-kafka: kafka already running (pid $(cat "$WORK/kafka.pid")) on 127.0.0.1:$(cat "$WORK/kafka.port")" >&2
	echo "127.0.0.1:$(cat "$WORK/kafka.port")"
	exit 0
fi
if [ -n "${KAFKA_PORT:-}" ]; then
	PORT=$KAFKA_PORT
	if port_open "$PORT" || port_open $((PORT + 1)); then
		echo "start-kafka: 127.0.0.1:$PORT or :$((PORT + 1)) is taken by another process" >&2
		exit 1
	fi
else
	PORT=
	for ((p = 9092; p < 9192; p += 2)); do
		if ! port_open "$p" && ! port_open $((p + 1)); then
			PORT=$p
			break
		fi
	done
	[ -n "$PORT" ] || { echo "start-kafka: no free port pair in 9092-9191" >&2; exit 1; }
fi
CPORT=$((PORT + 1))
ADDR=127.0.0.1:$PORT

command -v java >/dev/null || { echo "start-kafka: java (17+) not found" >&2; exit 1; }

cat >"$WORK/pom.xml" <<POM
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>citizen</groupId>
  <artifactId>kafka-for-tests</artifactId>
  <version>1</version>
  <dependencies>
    <!-- slf4j 2 first: kafka_2.13 brings slf4j-api 1.7, which cannot bind log4j2's slf4j2 bridge -->
    <dependency>
      <groupId>org.slf4j</groupId>
      <artifactId>slf4j-api</artifactId>
      <version>2.0.17</version>
    </dependency>
    <dependency>
      <groupId>org.apache.kafka</groupId>
      <artifactId>kafka_2.13</artifactId>
      <version>$VERSION</version>
    </dependency>
    <dependency>
      <groupId>org.apache.logging.log4j</groupId>
      <artifactId>log4j-slf4j2-impl</artifactId>
      <version>2.24.3</version>
    </dependency>
    <dependency>
      <groupId>org.apache.logging.log4j</groupId>
      <artifactId>log4j-core</artifactId>
      <version>2.24.3</version>
    </dependency>
  </dependencies>
</project>
POM
if ! cmp -s "$WORK/pom.xml" "$LIB/pom.xml"; then
	command -v mvn >/dev/null || { echo "start-kafka: mvn not found" >&2; exit 1; }
	rm -rf "$LIB" && mkdir -p "$LIB"
	echo "start-kafka: fetching kafka_2.13 $VERSION jars with mvn ..." >&2
	mvn -B -q -f "$WORK/pom.xml" dependency:copy-dependencies \
		-DoutputDirectory="$LIB" -DincludeScope=runtime >&2
	cp "$WORK/pom.xml" "$LIB/pom.xml" # marks the cache complete
fi

rm -rf "$WORK/data" && mkdir -p "$WORK/data"
cat >"$WORK/server.properties" <<PROPS
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:$CPORT
listeners=PLAINTEXT://$ADDR,CONTROLLER://127.0.0.1:$CPORT
advertised.listeners=PLAINTEXT://$ADDR
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT
log.dirs=$WORK/data
num.partitions=1
offsets.topic.replication.factor=1
offsets.topic.num.partitions=4
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
group.initial.rebalance.delay.ms=0
auto.create.topics.enable=true
message.max.bytes=16777216
PROPS
cat >"$WORK/log4j2.properties" <<'LOG'
status = warn
appender.out.type = Console
appender.out.name = out
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.out.ref = out
logger.kafka.name = kafka
logger.kafka.level = INFO
logger.apache.name = org.apache
logger.apache.level = WARN
LOG

JAVA_OPTS=(-Xms256m -Xmx512m -XX:+UseG1GC -Djava.awt.headless=true
	"-Dlog4j2.configurationFile=$WORK/log4j2.properties")
CLUSTER_ID=$(java "${JAVA_OPTS[@]}" -cp "$LIB/*" kafka.tools.StorageTool random-uuid 2>/dev/null | tail -n 1)
java "${JAVA_OPTS[@]}" -cp "$LIB/*" kafka.tools.StorageTool format \
	-t "$CLUSTER_ID" -c "$WORK/server.properties" >"$WORK/format.log" 2>&1 ||
	{ cat "$WORK/format.log" >&2; exit 1; }

nohup java "${JAVA_OPTS[@]}" -cp "$LIB/*" kafka.Kafka "$WORK/server.properties" \
	>"$WORK/kafka.log" 2>&1 </dev/null &
echo $! >"$WORK/kafka.pid"
echo "$PORT" >"$WORK/kafka.port"

for ((i = 0; i < TIMEOUT * 2; i++)); do
	if ! kill -0 "$(cat "$WORK/kafka.pid")" 2>/dev/null; then
		echo "start-kafka: kafka exited; last lines of $WORK/kafka.log:" >&2
		tail -n 40 "$WORK/kafka.log" >&2
		exit 1
	fi
	if grep -q "Kafka Server started" "$WORK/kafka.log" && port_open "$PORT"; then
		echo "start-kafka: kafka $VERSION ready on $ADDR (pid $(cat "$WORK/kafka.pid"), log $WORK/kafka.log)" >&2
		echo "$ADDR"
		exit 0
	fi
	sleep 0.5
done
echo "start-kafka: not ready after ${TIMEOUT}s; last lines of $WORK/kafka.log:" >&2
tail -n 40 "$WORK/kafka.log" >&2
exit 1
