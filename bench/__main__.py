from bench.latency import main

main()
