module lockd.example/lockd-example

go 1.19
