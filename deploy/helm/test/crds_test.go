package helmtest

// The CRDs the cluster test installs come from these modules, read from the
// Go module cache at test time (never copied into this repository): KEDA's
// config/crd/bases and prometheus-operator's example/prometheus-operator-crd.
// chart_test.go also reads KEDA's scaler source of the same version.
const (
	kedaModule         = "github.com/kedacore/keda/v2@v2.21.0"
	promOperatorModule = "github.com/prometheus-operator/prometheus-operator@v0.85.0"
)
