from dnnfusion.cli import main

raise SystemExit(main())
