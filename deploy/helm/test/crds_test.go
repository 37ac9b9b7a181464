package helmtest

import (
	"path/filepath"
	"testing"
)

// The CRDs the cluster test installs come from these modules, read from the
// Go module cache at test time (never copied into this repository): KEDA's
// config/crd/bases and prometheus-operator's example/prometheus-operator-crd.
// chart_test.go also reads KEDA's scaler source of the same version.
const (
	kedaModule         = "github.com/kedacore/keda/v2@v2.21.0"
	promOperatorModule = "github.com/prometheus-operator/prometheus-operator@v0.85.0"
)

// crdPaths are the CRD files and folders to install.
func crdPaths(t *testing.T) []string {
	t.Helper()
	return []string{
		filepath.Join(moduleDir(t, kedaModule), "config", "crd", "bases"),
		filepath.Join(moduleDir(t, promOperatorModule), "example", "prometheus-operator-crd", "monitoring.coreos.com_servicemonitors.yaml"),
	}
}
