#!/usr/bin/env bash
# Copies the Maven Central peers (peers/pom.xml) into .cache/peers and compiles the Hadoop launcher.
# Maven's own repository is kept in .cache/m2, so a second run downloads nothing. On failure it says
# in one line which artifact could not be had and why; the full Maven log stays in .cache/peers.
set -euo pipefail
cd "$(dirname "$0")/.."
peers="$PWD/.cache/peers"
log="$peers/maven.log"
mkdir -p "$peers" .cache/m2
command -v mvn >/dev/null || { echo "make peers needs Maven (apt-get install -y maven) and a JDK 17"; exit 1; }
command -v javac >/dev/null || { echo "make peers needs a JDK 17 (javac): apt-get install -y openjdk-17-jdk-headless"; exit 1; }
echo "fetching the peers from Maven Central into .cache/peers (Kafka 4.x, Hadoop mini clusters, Spark's Kafka source and Avro functions, a Java schema registry client, the PostgreSQL JDBC driver, the Debezium PostgreSQL connector)"
if ! mvn -B -ntp -Dmaven.repo.local="$PWD/.cache/m2" -Dpeers.dir="$peers" -f peers/pom.xml generate-resources >"$log" 2>&1; then
  artifact=$(grep -oE "(Could not (find|resolve|transfer) artifact|Failed to collect dependencies at|Could not resolve dependencies for project [^:]+:[^:]+:[^:]+:[^:]+: The following artifacts could not be resolved:) [^ ,]+" "$log" | head -1 | awk '{print $NF}')
  if grep -qE "UnknownHost|Connection refused|Connect to .* failed|Network is unreachable|timed out" "$log"; then
    echo "make peers: Maven Central cannot be reached (needed for ${artifact:-the peers}); see $log"
  else
    echo "make peers: could not get ${artifact:-an artifact of peers/pom.xml}; see $log"
  fi
  exit 1
fi
mkdir -p "$peers/launcher"
javac -d "$peers/launcher" -cp "$peers/hadoop/*" peers/MiniClusters.java
touch "$peers/maven.done"
