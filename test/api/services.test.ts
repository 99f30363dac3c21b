import { SERVICES } from '../../scripts/services';

describe('npm start service list', () => {
  it('when npm start runs, then api layout a listens on 3000 and layout b on 3001 from the built server', () => {
    expect(SERVICES.filter((service) => service.name.startsWith('api-'))).toEqual([
      { name: 'api-a', command: 'node dist/services/api/src/server.js', env: { API_LAYOUT: 'a', PORT: '3000' }, port: 3000 },
      { name: 'api-b', command: 'node dist/services/api/src/server.js', env: { API_LAYOUT: 'b', PORT: '3001' }, port: 3001 },
    ]);
  });

  it('when services are listed, then names and ports are unique', () => {
    const ports = SERVICES.map((service) => service.port).filter((port) => port !== null);
    expect(new Set(SERVICES.map((service) => service.name)).size).toBe(SERVICES.length);
    expect(new Set(ports).size).toBe(ports.length);
  });
});
