from backendmgr.cli.main import main

raise SystemExit(main())
