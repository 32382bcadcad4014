#[test]
fn scratch() {
    let mut ctx = crate::Context::new();
    ctx.set_allow_unregistered(true);
    let src = std::fs::read("/work/main/tests/ir-core/roundtrip/func_basic.qir").unwrap();
    match crate::parse_module(&mut ctx, &src, "func_basic.qir") {
        Ok(m) => {
            let s = crate::module_to_string(&ctx, &m);
            println!("{s}");
            let m2 = crate::parse_module(&mut ctx, s.as_bytes(), "p").unwrap_or_else(|d| panic!("{}", d));
            let s2 = crate::module_to_string(&ctx, &m2);
            assert_eq!(s, s2);
        }
        Err(d) => { let mut sm = crate::SourceMap::new(); sm.add("func_basic.qir".into(), std::sync::Arc::new(src.clone())); panic!("{}", d.render(&sm)) }
    }
}
