#!/usr/bin/env bash
# Formats the Java sources with google-java-format (the version run-tests checks with):
#   clients/java/format.sh           rewrite in place
#   clients/java/format.sh --check   list unformatted files, exit 1 if any
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo_local="${MAVEN_REPO_LOCAL:-${XDG_CACHE_HOME:-$HOME/.cache}/idemd-ci/m2}"
version=1.28.0
jar="$repo_local/com/google/googlejavaformat/google-java-format/$version/google-java-format-$version-all-deps.jar"
if [ ! -f "$jar" ]; then
  mvn -B -q -Dstyle.color=never -Dmaven.repo.local="$repo_local" \
    org.apache.maven.plugins:maven-dependency-plugin:3.8.1:get \
    -Dartifact="com.google.googlejavaformat:google-java-format:$version:jar:all-deps" -Dtransitive=false
fi
# google-java-format reaches into javac's internals.
opens=()
for package in api code file parser tree util; do
  opens+=("--add-exports=jdk.compiler/com.sun.tools.javac.$package=ALL-UNNAMED")
done
mapfile -t sources < <(find "$here/src" -name '*.java' | sort)
if [ "${1:-}" = "--check" ]; then
  unformatted="$(java "${opens[@]}" -jar "$jar" --dry-run "${sources[@]}")"
  if [ -n "$unformatted" ]; then
    echo "google-java-format: these files are not formatted (run clients/java/format.sh):" >&2
    echo "$unformatted" >&2
    exit 1
  fi
else
  java "${opens[@]}" -jar "$jar" --replace "${sources[@]}"
fi
