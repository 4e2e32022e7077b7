"""Probes a coordinator or an agent with Python's gRPC, independently of Cohort's own code.

  grpc_probe.py health ADDR [SERVICE]            prints the health status of SERVICE
                                                 (default "": overall), e.g. SERVING
  grpc_probe.py watch-health ADDR OUT [SERVICE]  appends each health status the server
                                                 streams to OUT
  grpc_probe.py services ADDR          prints the service names reflection lists
"""
import sys

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc


def channel(addr):
    return grpc.insecure_channel(addr, options=[("grpc.enable_http_proxy", 0)])


def main():
    mode, addr = sys.argv[1], sys.argv[2]
    with channel(addr) as ch:
        if mode == "health":
            stub = health_pb2_grpc.HealthStub(ch)
            service = sys.argv[3] if len(sys.argv) > 3 else ""
            try:
                resp = stub.Check(health_pb2.HealthCheckRequest(service=service), timeout=5)
            except grpc.RpcError as e:
                print(e.code().name)
                return
            print(health_pb2.HealthCheckResponse.ServingStatus.Name(resp.status))
        elif mode == "watch-health":
            stub = health_pb2_grpc.HealthStub(ch)
            with open(sys.argv[3], "a", buffering=1) as out:
                try:
                    service = sys.argv[4] if len(sys.argv) > 4 else ""
                    for resp in stub.Watch(health_pb2.HealthCheckRequest(service=service), timeout=60):
                        out.write(health_pb2.HealthCheckResponse.ServingStatus.Name(resp.status) + "\n")
                except grpc.RpcError as e:
                    out.write("END " + e.code().name + "\n")
        elif mode == "services":
            stub = reflection_pb2_grpc.ServerReflectionStub(ch)
            req = reflection_pb2.ServerReflectionRequest(list_services="")
            for resp in stub.ServerReflectionInfo(iter([req]), timeout=5):
                for s in resp.list_services_response.service:
                    print(s.name)
        else:
            sys.exit("unknown mode " + mode)


if __name__ == "__main__":
    main()
