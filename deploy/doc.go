// Package deploy holds the deployment files and their checks; it has no code
// of its own. Here are the configs docker-compose.yml uses (HAProxy,
// Prometheus, NATS) and the Helm chart (helm/mcpqueue, tested by its own
// module in helm/test). go test ./deploy/ loads the compose file as docker
// compose does and holds it against the Dockerfile and the flags api and
// worker accept; with a Docker engine (MCPQ_DOCKER_HOST) it also starts the
// images. See docs/deploy-compose.md and docs/kubernetes.md.
package deploy
