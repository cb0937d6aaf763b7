module kore.dev/bench/client-go-queue

go 1.23

require k8s.io/client-go v0.32.0
