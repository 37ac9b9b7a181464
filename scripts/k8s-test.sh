#!/usr/bin/env bash
# Tests the Helm chart (deploy/helm/mcpqueue) against a real Kubernetes API
# server: renders it with Helm's Go library for several values files and
# applies every object with server-side dry run to kube-apiserver + etcd,
# with KEDA's and prometheus-operator's CRDs installed (deploy/helm/test).
#
#   scripts/k8s-test.sh              # build what is missing, run the tests
#   scripts/k8s-test.sh -run Render  # extra arguments go to go test
#
# kube-apiserver is built from the k8s.io/kubernetes module (the Go module
# proxy is the only source this machine reaches) into
# ${XDG_CACHE_HOME:-$HOME/.cache}/mcpqueue-k8s/<version>/: about 9 minutes
# the first time on 2 cores, nothing after. etcd is Debian's etcd-server.
set -euo pipefail
cd "$(dirname "$0")/.."

K8S_VERSION=1.37.2 # kube-apiserver; the test module's k8s.io client libraries are v0.37.x
cache="${XDG_CACHE_HOME:-$HOME/.cache}/mcpqueue-k8s/v${K8S_VERSION}"

# kube-apiserver, built once per version. k8s.io/kubernetes requires its
# staging modules (k8s.io/api, client-go, …) at v0.0.0 and replaces them with
# ./staging/…, which a module cache copy cannot use: the build module
# replaces each with its published v0.<minor>.<patch>.
build_apiserver() {
	local b="$cache/build"
	rm -rf "$b" && mkdir -p "$b"
	local gomod
	gomod=$(go mod download -json "k8s.io/kubernetes@v${K8S_VERSION}" | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",$/\1/p')
	{
		echo "module mcpqueue-k8s-build"
		echo
		echo "go $(go env GOVERSION | sed 's/^go//')"
		echo
		echo "require k8s.io/kubernetes v${K8S_VERSION}"
		echo
		sed -n 's#^[[:space:]]*\(k8s\.io/[a-z0-9-]*\) => \./staging/src/.*#replace \1 => \1 v0.'"${K8S_VERSION#1.}"'#p' "$gomod"
	} >"$b/go.mod"
	echo 'package tools' >"$b/tools.go"
	(
		cd "$b"
		go get "k8s.io/kubernetes/cmd/kube-apiserver@v${K8S_VERSION}"
		local v=k8s.io/component-base/version
		CGO_ENABLED=0 go build -trimpath -o "$cache/kube-apiserver.tmp" \
			-ldflags "-s -w -X $v.gitVersion=v${K8S_VERSION} -X $v.gitMajor=${K8S_VERSION%%.*} -X $v.gitMinor=$(echo "$K8S_VERSION" | cut -d. -f2) -X $v.gitTreeState=clean" \
			k8s.io/kubernetes/cmd/kube-apiserver
	)
	mv "$cache/kube-apiserver.tmp" "$cache/kube-apiserver"
	rm -rf "$b"
}

if [ ! -x "$cache/kube-apiserver" ]; then
	start=$(date +%s)
	echo "building kube-apiserver v${K8S_VERSION} into $cache (once per version)"
	build_apiserver
	echo "kube-apiserver built in $(($(date +%s) - start))s"
fi

command -v etcd >/dev/null || (apt-get update && apt-get install -y --no-install-recommends etcd-server)

if [ "${1:-}" = "--build-only" ]; then
	exit 0
fi

# envtest (controller-runtime) starts etcd and kube-apiserver from these.
export TEST_ASSET_KUBE_APISERVER="$cache/kube-apiserver"
TEST_ASSET_ETCD="$(command -v etcd)"
export TEST_ASSET_ETCD
export MCPQ_REQUIRE_K8S=1 # TestServerSideDryRun fails rather than skips without them
cd deploy/helm/test
go test -count=1 -timeout 20m "$@" ./...
