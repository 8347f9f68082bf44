try:
    from backendmgr.cli.main import main
except KeyboardInterrupt:  # Ctrl-C while Python imports: no traceback either
    raise SystemExit(130) from None

raise SystemExit(main())
