/** Style sheets are bundled by esbuild into app.css; importing one yields nothing at run time. */
declare module '*.css'
