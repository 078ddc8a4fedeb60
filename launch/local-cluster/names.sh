# The names and addresses of a cluster of launch/local-cluster, derived from its state
# directory alone, so that stop.sh finds what start.sh made even without the state files.
# Sourced by start.sh and stop.sh.

# cluster_names STATE_DIR NODES: sets cluster_hash (8 hex digits of the directory's absolute
# path), head_ns and node_ns (array, n1 first): the network namespaces' names.
cluster_names() {
  local k
  cluster_hash=$(printf '%s' "$1" | md5sum | cut -c1-8)
  head_ns="mpiddp-$cluster_hash-head"
  node_ns=()
  for k in $(seq "$2"); do node_ns+=("mpiddp-$cluster_hash-n$k"); done
}

# The addresses: private to the cluster's namespaces, so every cluster may use the same ones.
head_addr=10.77.0.1
node_addr() { echo "10.77.0.$((10 + $1))"; }
